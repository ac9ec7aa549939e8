"""Small real models for tests and benchmarks: Hugging Face transformers
families built from small configs (random weights, nothing downloaded) and a
ResNet-style CNN written here. One place, so that tests/test_models.py and
bench/bench_models.py run the same models.

Each entry builds (model, inputs) for a size: "tiny" (tests: seconds) or
"bench" (bench/bench_models.py: the shapes the issue measured, e.g. a 2-layer
Llama with dim 256, seq 64, batch 2). transformers is imported lazily.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import torch
from torch import nn


@dataclass(frozen=True)
class Spec:
    build: Callable[[str], tuple[nn.Module, dict]]  # size -> (model in eval mode, inputs)
    output: str  # attribute of the model output compared against CPU ("" = the tensor)
    causal_lm: bool = False  # supports generate()


def _dims(size: str) -> dict:
    if size == "tiny":
        return dict(hidden=64, inter=128, layers=2, heads=4, seq=16, batch=2, vocab=256)
    if size == "bench":
        return dict(hidden=256, inter=688, layers=2, heads=8, seq=64, batch=2, vocab=1024)
    raise ValueError(f"size must be 'tiny' or 'bench', got {size!r}")


def _layers(d: dict) -> dict:
    """The transformer stack's sizes, as most transformers configs name them."""
    return dict(
        hidden_size=d["hidden"],
        intermediate_size=d["inter"],
        num_hidden_layers=d["layers"],
        num_attention_heads=d["heads"],
    )


def _ids(d: dict, seed: int = 0) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    return torch.randint(3, d["vocab"], (d["batch"], d["seq"]), generator=g)


def _lm(config_cls, model_cls, extra: Callable[[dict], dict]):
    def build(size: str):
        import transformers  # noqa: F401  (lazy: only tests and benchmarks need it)

        d = _dims(size)
        cfg = config_cls(**extra(d))
        torch.manual_seed(0)
        return model_cls(cfg).eval(), {"input_ids": _ids(d)}

    return build


def _llama_cfg(d):
    return dict(
        vocab_size=d["vocab"],
        **_layers(d),
        num_key_value_heads=d["heads"] // 2,  # grouped-query attention
        max_position_embeddings=256,
        pad_token_id=0,
        bos_token_id=1,
        eos_token_id=2,
    )


def _mixtral_cfg(d):
    # Mixture of experts: a top-2 router over 4 experts per layer (transformers'
    # grouped_mm experts: sort, histc, cumsum and _grouped_mm off the CPU).
    return dict(_llama_cfg(d), num_local_experts=4, num_experts_per_tok=2)


def _gpt2_cfg(d):
    return dict(
        vocab_size=d["vocab"],
        n_embd=d["hidden"],
        n_inner=d["inter"],
        n_layer=d["layers"],
        n_head=d["heads"],
        n_positions=256,
        bos_token_id=1,
        eos_token_id=2,
        pad_token_id=0,
    )


def _bert(size: str):
    import transformers as T

    d = _dims(size)
    cfg = T.BertConfig(
        vocab_size=d["vocab"],
        **_layers(d),
        max_position_embeddings=256,
    )
    torch.manual_seed(0)
    ids = _ids(d)
    mask = torch.ones_like(ids)
    mask[0, -3:] = 0  # a padded sequence: the mask path runs
    return T.BertModel(cfg).eval(), {"input_ids": ids, "attention_mask": mask}


def _t5(size: str):
    import transformers as T

    d = _dims(size)
    cfg = T.T5Config(
        vocab_size=d["vocab"],
        d_model=d["hidden"],
        d_kv=d["hidden"] // d["heads"],
        d_ff=d["inter"],
        num_layers=d["layers"],
        num_heads=d["heads"],
        decoder_start_token_id=0,
    )
    torch.manual_seed(0)
    ids = _ids(d)
    return T.T5ForConditionalGeneration(cfg).eval(), {
        "input_ids": ids,
        "decoder_input_ids": ids[:, : d["seq"] // 2].contiguous(),
    }


def _whisper(size: str):
    """Speech encoder-decoder: two conv1d + gelu over a log-mel spectrogram, then
    transformer layers; the decoder cross-attends to the encoder's states."""
    import transformers as T

    d = _dims(size)
    mels, frames = (16, 60) if size == "tiny" else (80, 300)
    cfg = T.WhisperConfig(
        vocab_size=d["vocab"],
        d_model=d["hidden"],
        encoder_layers=d["layers"],
        decoder_layers=d["layers"],
        encoder_attention_heads=d["heads"],
        decoder_attention_heads=d["heads"],
        encoder_ffn_dim=d["inter"],
        decoder_ffn_dim=d["inter"],
        num_mel_bins=mels,
        max_source_positions=frames // 2,
        max_target_positions=128,
        pad_token_id=0,
        bos_token_id=1,
        eos_token_id=2,
        decoder_start_token_id=1,
    )
    torch.manual_seed(0)
    feats = torch.randn(d["batch"], mels, frames, generator=torch.Generator().manual_seed(1))
    return T.WhisperModel(cfg).eval(), {
        "input_features": feats,
        "decoder_input_ids": _ids(d)[:, : d["seq"] // 2].contiguous(),
    }


def _wav2vec2(size: str):
    """Speech encoder on raw audio: strided conv1d feature extractor with group
    norm and gelu, a weight-normed grouped positional conv1d, then transformer
    layers."""
    import transformers as T

    d = _dims(size)
    cfg = T.Wav2Vec2Config(
        **_layers(d),
        conv_dim=(32, 32, 32) if size == "tiny" else (128, 128, 128),
        conv_stride=(5, 2, 2),
        conv_kernel=(10, 3, 3),
        num_conv_pos_embeddings=16,
        num_conv_pos_embedding_groups=4,
    )
    torch.manual_seed(0)
    samples = 2000 if size == "tiny" else 16000
    audio = torch.randn(d["batch"], samples, generator=torch.Generator().manual_seed(1))
    return T.Wav2Vec2Model(cfg).eval(), {"input_values": audio}


def _mobilenet_v2(size: str):
    """Inverted residuals: 1x1 expand, depthwise 3x3, 1x1 project, relu6
    (hardtanh), batch norm. Kaiming-initialised convolutions: transformers'
    init shrinks the activations of a random network towards 0."""
    import transformers as T

    image = 32 if size == "tiny" else 96
    cfg = T.MobileNetV2Config(image_size=image, depth_multiplier=0.35, num_labels=10)
    torch.manual_seed(0)
    model = T.MobileNetV2ForImageClassification(cfg).eval()
    for m in model.modules():
        if isinstance(m, nn.Conv2d):
            nn.init.kaiming_normal_(m.weight, nonlinearity="relu")
    x = torch.randn(2, 3, image, image, generator=torch.Generator().manual_seed(1))
    return model, {"pixel_values": x}


def _vit(size: str):
    import transformers as T

    d = _dims(size)
    image = 32 if size == "tiny" else 64
    cfg = T.ViTConfig(
        image_size=image,
        patch_size=8,
        num_channels=3,
        **_layers(d),
        num_labels=10,
    )
    torch.manual_seed(0)
    x = torch.randn(d["batch"], 3, image, image, generator=torch.Generator().manual_seed(1))
    return T.ViTForImageClassification(cfg).eval(), {"pixel_values": x}


def _videomae(size: str):
    """Video: a Conv3d tubelet embedding (2 frames x patch^2, stride = kernel) and a CPU
    position table the model moves to the device per call (Note [Host inputs])."""
    import transformers as T

    d = _dims(size)
    image, patch = (32, 8) if size == "tiny" else (64, 16)
    cfg = T.VideoMAEConfig(
        image_size=image, patch_size=patch, num_frames=4, tubelet_size=2, **_layers(d),
        num_labels=10,
    )
    torch.manual_seed(0)
    x = torch.randn(d["batch"], 4, 3, image, image, generator=torch.Generator().manual_seed(1))
    return T.VideoMAEForVideoClassification(cfg).eval(), {"pixel_values": x}


class BasicBlock(nn.Module):
    """ResNet basic block: conv-bn-relu-conv-bn plus the (projected) identity."""

    def __init__(self, cin: int, cout: int, stride: int):
        super().__init__()
        self.conv1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(cout)
        self.conv2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(cout)
        self.down = None
        if stride != 1 or cin != cout:
            self.down = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout))

    def forward(self, x):
        y = torch.relu(self.bn1(self.conv1(x)))
        y = self.bn2(self.conv2(y))
        return torch.relu(y + (x if self.down is None else self.down(x)))


class ResNet(nn.Module):
    """A small ResNet: stem conv + maxpool, basic blocks, adaptive avgpool, linear."""

    def __init__(self, width: int = 16, blocks: int = 2, classes: int = 10):
        super().__init__()
        self.stem = nn.Sequential(
            nn.Conv2d(3, width, 7, 2, 3, bias=False), nn.BatchNorm2d(width), nn.ReLU(),
            nn.MaxPool2d(3, 2, 1),
        )
        layers, c = [], width
        for i in range(blocks):
            layers.append(BasicBlock(c, c * (2 if i else 1), 1 if i == 0 else 2))
            c = c * (2 if i else 1)
        self.layers = nn.Sequential(*layers)
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(c, classes)

    def forward(self, x):
        return self.fc(torch.flatten(self.pool(self.layers(self.stem(x))), 1))


def _resnet(size: str):
    width, image, batch = (8, 32, 2) if size == "tiny" else (32, 96, 2)
    torch.manual_seed(0)
    m = ResNet(width)
    for mod in m.modules():  # non-trivial running statistics
        if isinstance(mod, nn.BatchNorm2d):
            mod.running_mean.uniform_(-0.5, 0.5)
            mod.running_var.uniform_(0.5, 1.5)
    x = torch.randn(batch, 3, image, image, generator=torch.Generator().manual_seed(1))
    return m.eval(), {"x": x}


def _families() -> dict[str, Spec]:
    import transformers as T

    return {
        "llama": Spec(_lm(T.LlamaConfig, T.LlamaForCausalLM, _llama_cfg), "logits", True),
        "gpt2": Spec(_lm(T.GPT2Config, T.GPT2LMHeadModel, _gpt2_cfg), "logits", True),
        "qwen2": Spec(_lm(T.Qwen2Config, T.Qwen2ForCausalLM, _llama_cfg), "logits", True),
        "mixtral": Spec(_lm(T.MixtralConfig, T.MixtralForCausalLM, _mixtral_cfg), "logits", True),
        "bert": Spec(_bert, "last_hidden_state"),
        "t5": Spec(_t5, "logits"),
        "whisper": Spec(_whisper, "last_hidden_state"),
        "wav2vec2": Spec(_wav2vec2, "last_hidden_state"),
        "vit": Spec(_vit, "logits"),
        "videomae": Spec(_videomae, "logits"),
        "resnet": Spec(_resnet, ""),
        "mobilenet_v2": Spec(_mobilenet_v2, "logits"),
    }


NAMES = (
    "llama", "gpt2", "qwen2", "mixtral", "bert", "t5", "whisper", "wav2vec2", "vit", "videomae",
    "resnet", "mobilenet_v2",
)


def get(name: str) -> Spec:
    fams = _families()
    if name not in fams:
        raise ValueError(f"unknown model {name!r}; expected one of {', '.join(NAMES)}")
    return fams[name]


def output_of(spec: Spec, out) -> torch.Tensor:
    """The tensor compared against CPU."""
    return out if not spec.output else getattr(out, spec.output)


def to_device(inputs: dict, device) -> dict:
    return {k: v.to(device) for k, v in inputs.items()}
