// PrivateUse1 device registration: allocator, device guard (devices, streams,
// events), hooks, per-device generators and the random ops drawn with them.
#include <ATen/CPUGeneratorImpl.h>
#include <ATen/ExpandUtils.h>
#include <ATen/core/Tensor.h>
#include <ATen/detail/PrivateUse1HooksInterface.h>
#include <ATen/ops/empty.h>
#include <ATen/native/Resize.h>
#include <ATen/TensorOperators.h>
#include <ATen/ops/_assert_async.h>
#include <ATen/ops/empty_like.h>
#include <ATen/ops/randperm.h>
#include <c10/core/DeviceGuard.h>
#include <c10/core/impl/DeviceGuardImplInterface.h>
#include <torch/library.h>

#include <array>
#include <cstring>
#include <cstdlib>
#include <mutex>
#include <unordered_set>
#include <utility>
#include <vector>

#include "torch_bridge/bridge.h"
#include "torch_bridge/device.h"

namespace trn::bridge {
namespace {

constexpr int kMaxDevices = rt::Runtime::kMaxVisibleCores;
constexpr c10::DeviceType kTrn = c10::DeviceType::PrivateUse1;

thread_local int tls_device = 0;

// ---- Allocator ------------------------------------------------------------------
// One deleter per device index so a DataPtr needs no heap context to find the
// core whose caching allocator owns its block.
template <int I>
void FreeOnDevice(void* ptr) {
  if (rt::InForkedChild()) return;  // Note [Fork]
  rt::Runtime::Get().device(I).allocator().Free(ptr);
}
template <size_t... I>
constexpr std::array<c10::DeleterFnPtr, sizeof...(I)> MakeDeleters(std::index_sequence<I...>) {
  return {&FreeOnDevice<static_cast<int>(I)>...};
}
constexpr auto kDeleters = MakeDeleters(std::make_index_sequence<kMaxDevices>());

// Allocates device memory of a fixed device, or of the calling thread's current
// device (index -1). Stateless apart from the index; any thread may call.
class TrnAllocator final : public c10::Allocator {
 public:
  explicit TrnAllocator(int device_index) : device_index_(device_index) {}

  c10::DataPtr allocate(size_t n) override {
    const int index = device_index_ < 0 ? CurrentDevice() : device_index_;
    rt::Device& device = GetDevice(index);
    TORCH_CHECK(index < kMaxDevices, "trn: at most ", kMaxDevices, " devices are supported");
    const int stream_id = CurrentStreamId(index);
    void* ptr = Guarded([&] { return device.allocator().Allocate(n, stream_id); });
    return {ptr, ptr, kDeleters[index], c10::Device(kTrn, static_cast<c10::DeviceIndex>(index))};
  }

  // Device memory is host memory; callers (storage copies) see finished data
  // only after the device is idle.
  void copy_data(void* dest, const void* src, size_t count) const override {
    SyncAllDevices();
    std::memcpy(dest, src, count);
  }

 private:
  int device_index_;
};

TrnAllocator current_device_allocator(-1);
REGISTER_ALLOCATOR(kTrn, &current_device_allocator);

// ---- Pinned host memory -----------------------------------------------------------
// Note [Pinned memory]: tensor.pin_memory() and DataLoader(pin_memory=True) ask
// the accelerator's hooks for a pinned-memory allocator; trn raised there. A
// core reads host memory directly (device memory is host memory), so "pinned"
// only marks a buffer whose owner follows CUDA's contract: a non_blocking copy
// from it reads it when the stream gets there, unstaged, so the caller must
// not write it before synchronizing (Note [trn copies]). The allocator keeps
// its live blocks in a set for is_pinned().
std::mutex pinned_mu;
std::unordered_set<const void*>& PinnedBlocks() {
  static auto* blocks = new std::unordered_set<const void*>();  // outlives static destructors
  return *blocks;
}

void FreePinned(void* ptr) {
  {
    std::lock_guard<std::mutex> lock(pinned_mu);
    PinnedBlocks().erase(ptr);
  }
  std::free(ptr);
}

class PinnedHostAllocator final : public c10::Allocator {
 public:
  c10::DataPtr allocate(size_t n) override {
    constexpr size_t kAlign = 64;
    void* ptr = n == 0 ? nullptr : std::aligned_alloc(kAlign, (n + kAlign - 1) / kAlign * kAlign);
    TORCH_CHECK(n == 0 || ptr != nullptr, "trn: out of host memory pinning ", n, " bytes");
    if (ptr != nullptr) {
      std::lock_guard<std::mutex> lock(pinned_mu);
      PinnedBlocks().insert(ptr);
    }
    return {ptr, ptr, &FreePinned, c10::Device(c10::kCPU)};
  }
  void copy_data(void* dest, const void* src, size_t count) const override {
    std::memcpy(dest, src, count);
  }
};

PinnedHostAllocator pinned_allocator;

// ---- Device guard -----------------------------------------------------------------
rt::Event* AsEvent(void* event) { return static_cast<rt::Event*>(event); }

rt::Stream& RtStream(const c10::Stream& s) {
  rt::Device& device = GetDevice(s.device_index());
  return Guarded([&]() -> rt::Stream& { return device.GetStream(static_cast<int>(s.id())); });
}

// c10's view of the runtime: devices, thread-local current streams, events
// (a c10 event handle is a heap rt::Event). Stateless; any thread may call.
struct TrnGuardImpl final : public c10::impl::DeviceGuardImplInterface {
  c10::DeviceType type() const override { return kTrn; }

  c10::Device exchangeDevice(c10::Device d) const override {
    c10::Device old = getDevice();
    if (d.index() != old.index()) setDevice(d);
    return old;
  }
  c10::Device getDevice() const override {
    return c10::Device(kTrn, static_cast<c10::DeviceIndex>(CurrentDevice()));
  }
  void setDevice(c10::Device d) const override {
    TORCH_CHECK(d.type() == kTrn, "trn: expected a trn device, got ", d);
    if (d.index() >= 0) SetCurrentDevice(d.index());
  }
  void uncheckedSetDevice(c10::Device d) const noexcept override {
    if (d.index() >= 0) tls_device = d.index();
  }

  c10::Stream getStream(c10::Device d) const override {
    const int index = d.index() < 0 ? CurrentDevice() : d.index();
    return c10::Stream(c10::Stream::UNSAFE, c10::Device(kTrn, index), CurrentStreamId(index));
  }
  c10::Stream getDefaultStream(c10::Device d) const override {
    const int index = d.index() < 0 ? CurrentDevice() : d.index();
    return c10::Stream(c10::Stream::UNSAFE, c10::Device(kTrn, index), 0);
  }
  c10::Stream getStreamFromGlobalPool(c10::Device d, bool) const override {
    const int index = d.index() < 0 ? CurrentDevice() : d.index();
    rt::Device& device = GetDevice(index);
    const int id = Guarded([&] { return device.NewStream().id(); });
    return c10::Stream(c10::Stream::UNSAFE, c10::Device(kTrn, index), id);
  }
  c10::Stream getNewStream(c10::Device d, int) const override {
    return getStreamFromGlobalPool(d, false);
  }
  c10::Stream exchangeStream(c10::Stream s) const override {
    c10::Stream old = getStream(s.device());
    RtStream(s);  // validates the id
    SetCurrentStream(s.device_index(), static_cast<int>(s.id()));
    return old;
  }
  c10::DeviceIndex deviceCount() const noexcept override {
    try {
      return static_cast<c10::DeviceIndex>(rt::Runtime::Get().device_count());
    } catch (...) {
      return 0;  // required not to throw; torch.trn.device_count() reports the error
    }
  }

  void record(void** event, const c10::Stream& stream, const c10::DeviceIndex,
              const c10::EventFlag) const override {
    rt::Stream& s = RtStream(stream);
    if (*event == nullptr) *event = new rt::Event();
    Guarded([&] { AsEvent(*event)->Record(s); });
  }
  void block(void* event, const c10::Stream& stream) const override {
    if (event == nullptr) return;
    rt::Stream& s = RtStream(stream);
    Guarded([&] { s.WaitEvent(*AsEvent(event)); });
  }
  bool queryEvent(void* event) const override {
    return event == nullptr || AsEvent(event)->Query();
  }
  void destroyEvent(void* event, const c10::DeviceIndex) const noexcept override {
    delete AsEvent(event);
  }
  void synchronizeEvent(void* event) const override {
    if (event != nullptr) Guarded([&] { AsEvent(event)->Synchronize(); });
  }
  double elapsedTime(void* start, void* end, const c10::DeviceIndex) const override {
    TORCH_CHECK_VALUE(start != nullptr && end != nullptr,
                      "trn: elapsed_time needs both events recorded");
    return Guarded([&] { return AsEvent(start)->ElapsedMs(*AsEvent(end)); });
  }

  bool queryStream(const c10::Stream& stream) const override { return RtStream(stream).Query(); }
  void synchronizeStream(const c10::Stream& stream) const override {
    rt::Stream& s = RtStream(stream);
    Guarded([&] { s.Synchronize(); });
  }
  void synchronizeDevice(const c10::DeviceIndex index) const override {
    rt::Device& device = GetDevice(index < 0 ? CurrentDevice() : index);
    Guarded([&] { device.Synchronize(); });
  }
  // Blocks are reused only by the stream that allocated them; a tensor used on
  // another stream must be kept alive by the caller until that stream is done.
  void recordDataPtrOnStream(const c10::DataPtr&, const c10::Stream&) const override {}
};

C10_REGISTER_GUARD_IMPL(PrivateUse1, TrnGuardImpl);

// ---- Hooks ----------------------------------------------------------------------
// What generic ATen code asks an accelerator. Stateless; any thread may call.
struct TrnHooks final : public at::PrivateUse1HooksInterface {
  bool isBuilt() const override { return true; }
  bool isAvailable() const override { return deviceCount() > 0; }
  bool hasPrimaryContext(c10::DeviceIndex) const override { return true; }
  void init() const override {}
  c10::DeviceIndex deviceCount() const override {
    try {
      return static_cast<c10::DeviceIndex>(rt::Runtime::Get().device_count());
    } catch (...) {
      return 0;
    }
  }
  void setCurrentDevice(c10::DeviceIndex d) const override { SetCurrentDevice(d); }
  c10::DeviceIndex getCurrentDevice() const override { return CurrentDevice(); }
  c10::DeviceIndex exchangeDevice(c10::DeviceIndex d) const override {
    const int old = CurrentDevice();
    if (d >= 0 && d != old) SetCurrentDevice(d);
    return static_cast<c10::DeviceIndex>(old);
  }
  c10::DeviceIndex maybeExchangeDevice(c10::DeviceIndex d) const override {
    return exchangeDevice(d);
  }
  bool isPinnedPtr(const void* ptr) const override { return IsPinned(ptr); }
  at::Allocator* getPinnedMemoryAllocator() const override { return &pinned_allocator; }
  // rt::Allocator has no pointer lookup; the current device is the best answer.
  c10::Device getDeviceFromPtr(void*) const override {
    return c10::Device(kTrn, static_cast<c10::DeviceIndex>(CurrentDevice()));
  }
  const at::Generator& getDefaultGenerator(c10::DeviceIndex index) const override {
    return DefaultGenerator(index);
  }
  at::Generator getNewGenerator(c10::DeviceIndex index) const override {
    const int d = index < 0 ? CurrentDevice() : index;
    GetDevice(d);
    return at::make_generator<TrnGenerator>(d);
  }
  void resizePrivateUse1Bytes(const c10::Storage& storage, size_t new_bytes) const override {
    TORCH_CHECK(storage.resizable(), "trn: trying to resize a storage that is not resizable");
    const size_t old_bytes = storage.nbytes();
    c10::DataPtr fresh = storage.allocator()->allocate(new_bytes);
    if (old_bytes > 0 && new_bytes > 0) {
      SyncAllDevices();
      std::memcpy(fresh.get(), storage.data(), std::min(old_bytes, new_bytes));
    }
    storage.unsafeGetStorageImpl()->set_data_ptr_noswap(std::move(fresh));
    storage.unsafeGetStorageImpl()->set_nbytes(new_bytes);
  }
};

const bool kHooksRegistered = [] {
  at::RegisterPrivateUse1HooksInterface(new TrnHooks());
  return true;
}();

}  // namespace

bool IsPinned(const void* ptr) {
  if (ptr == nullptr) return false;
  std::lock_guard<std::mutex> lock(pinned_mu);
  return PinnedBlocks().count(ptr) != 0;
}

// ---- Devices ------------------------------------------------------------------------
int DeviceCount() {
  return Guarded([] { return rt::Runtime::Get().device_count(); });
}

rt::Device& GetDevice(int device_index) {
  return Guarded([&]() -> rt::Device& { return rt::Runtime::Get().device(device_index); });
}

int CurrentDevice() { return tls_device; }

void SetCurrentDevice(int device_index) {
  GetDevice(device_index);  // ValueError naming the index and the count
  tls_device = device_index;
}

c10::Allocator* DeviceAllocator(int device_index) {
  if (device_index < 0) return &current_device_allocator;
  TORCH_CHECK_VALUE(device_index < kMaxDevices, "trn: device index ", device_index,
                    " is beyond the supported ", kMaxDevices, " devices");
  static std::array<TrnAllocator*, kMaxDevices> allocators = [] {
    std::array<TrnAllocator*, kMaxDevices> a{};
    for (int i = 0; i < kMaxDevices; ++i) a[i] = new TrnAllocator(i);  // leaked: used at exit
    return a;
  }();
  return allocators[device_index];
}

void SyncCurrentStream(int device_index) {
  rt::Stream& stream = CurrentStream(device_index);
  Guarded([&] { stream.Synchronize(); });
}

void SyncAllDevices() {
  Guarded([] { rt::Runtime::Get().SynchronizeAll(); });
}

// ---- Generators ---------------------------------------------------------------------
TrnGenerator::TrnGenerator(int device_index, uint64_t seed)
    : c10::GeneratorImpl(c10::Device(kTrn, static_cast<c10::DeviceIndex>(device_index)),
                         c10::DispatchKeySet(c10::DispatchKey::PrivateUse1)),
      cpu_(at::make_generator<at::CPUGeneratorImpl>(seed)) {}

void TrnGenerator::set_current_seed(uint64_t seed) { cpu_.set_current_seed(seed); }
void TrnGenerator::set_offset(uint64_t offset) { cpu_.set_offset(offset); }
uint64_t TrnGenerator::get_offset() const { return cpu_.get_offset(); }
uint64_t TrnGenerator::current_seed() const { return cpu_.current_seed(); }
uint64_t TrnGenerator::seed() { return cpu_.seed(); }
void TrnGenerator::set_state(const c10::TensorImpl& new_state) {
  cpu_.unsafeGetGeneratorImpl()->set_state(new_state);
}
c10::intrusive_ptr<c10::TensorImpl> TrnGenerator::get_state() const {
  return cpu_.unsafeGetGeneratorImpl()->get_state();
}
TrnGenerator* TrnGenerator::clone_impl() const {
  auto* copy = new TrnGenerator(device().index());
  copy->cpu_ = cpu_.clone();
  return copy;
}

const at::Generator& DefaultGenerator(int device_index) {
  static std::vector<at::Generator> generators = [] {
    std::vector<at::Generator> g;
    const int n = DeviceCount();
    for (int i = 0; i < n; ++i) g.push_back(at::make_generator<TrnGenerator>(i));
    return g;
  }();
  const int index = device_index < 0 ? CurrentDevice() : device_index;
  GetDevice(index);
  return generators.at(index);
}

namespace {

// ---- Random ops (Note [trn random numbers]) -------------------------------------------
template <typename Fill>
at::Tensor& RandomOnHost(at::Tensor& self, const std::optional<at::Generator>& gen, Fill fill) {
  const int index = DeviceIndex(self);
  if (self.numel() == 0) return self;
  auto* g = at::get_generator_or_default<TrnGenerator>(gen, DefaultGenerator(index));
  // self's layout: CPU's generator fills a strided tensor in memory order.
  at::Tensor host = at::empty_like(self, self.options().device(c10::kCPU));
  {
    std::lock_guard<std::mutex> lock(g->mutex_);
    fill(host, g->cpu());
  }
  CopyFromPrivateHost(self, host);
  return self;
}

at::Tensor& Normal(at::Tensor& self, double mean, double std, std::optional<at::Generator> gen) {
  return RandomOnHost(self, gen, [&](at::Tensor& h, at::Generator& g) { h.normal_(mean, std, g); });
}
at::Tensor& Uniform(at::Tensor& self, double from, double to, std::optional<at::Generator> gen) {
  return RandomOnHost(self, gen, [&](at::Tensor& h, at::Generator& g) { h.uniform_(from, to, g); });
}
at::Tensor& RandomFrom(at::Tensor& self, int64_t from, std::optional<int64_t> to,
                       std::optional<at::Generator> gen) {
  return RandomOnHost(self, gen, [&](at::Tensor& h, at::Generator& g) { h.random_(from, to, g); });
}
at::Tensor& RandomTo(at::Tensor& self, int64_t to, std::optional<at::Generator> gen) {
  return RandomOnHost(self, gen, [&](at::Tensor& h, at::Generator& g) { h.random_(to, g); });
}
at::Tensor& Random(at::Tensor& self, std::optional<at::Generator> gen) {
  return RandomOnHost(self, gen, [&](at::Tensor& h, at::Generator& g) { h.random_(g); });
}
at::Tensor& BernoulliFloat(at::Tensor& self, double p, std::optional<at::Generator> gen) {
  return RandomOnHost(self, gen, [&](at::Tensor& h, at::Generator& g) { h.bernoulli_(p, g); });
}
// bernoulli_(p tensor) (torch.bernoulli of probabilities): uniform draws,
// compared with p on the device, so p is never read back; p outside [0, 1]
// (or NaN) fails CPU's check asynchronously, at the next synchronizing call.
at::Tensor& BernoulliTensor(at::Tensor& self, const at::Tensor& p_in,
                            std::optional<at::Generator> gen) {
  TORCH_CHECK_NOT_IMPLEMENTED(at::isFloatingType(p_in.scalar_type()),
                              "\"bernoulli_tensor_cpu_p_\" not implemented for '",
                              c10::toString(p_in.scalar_type()), "'");
  TORCH_CHECK(at::is_expandable_to(p_in.sizes(), self.sizes()), "bernoulli_: p of size ",
              p_in.sizes(), " does not broadcast to self of size ", self.sizes());
  const at::Tensor p = p_in.device() == self.device() ? p_in : p_in.to(self.device());
  at::_assert_async(((p >= 0) & (p <= 1)).all(), "Expected p_in >= 0 && p_in <= 1 to be true");
  at::Tensor u = at::empty(self.sizes(), self.options().dtype(at::kFloat));
  Uniform(u, 0, 1, gen);
  self.copy_(u.lt(p));
  return self;
}
// randperm: drawn by the trn generator on the host, as every random op.
at::Tensor& RandpermOut(int64_t n, std::optional<at::Generator> gen, at::Tensor& out) {
  TORCH_CHECK(n >= 0, "n must be non-negative, got", n);
  at::native::resize_output(out, {n});
  return RandomOnHost(out, gen, [&](at::Tensor& h, at::Generator& g) { at::randperm_out(h, n, g); });
}
at::Tensor& Exponential(at::Tensor& self, double lambd, std::optional<at::Generator> gen) {
  return RandomOnHost(self, gen,
                      [&](at::Tensor& h, at::Generator& g) { h.exponential_(lambd, g); });
}

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("normal_", Normal);
  m.impl("uniform_", Uniform);
  m.impl("random_.from", RandomFrom);
  m.impl("random_.to", RandomTo);
  m.impl("random_", Random);
  m.impl("bernoulli_.float", BernoulliFloat);
  m.impl("bernoulli_.Tensor", BernoulliTensor);
  m.impl("randperm.generator_out", RandpermOut);
  m.impl("exponential_", Exponential);
}

}  // namespace
}  // namespace trn::bridge
