"""The HTML explorer in headless Chromium (Debian's chromium, no Selenium/Playwright).

Each test embeds a report document into the template (as `trnscope report` does), dumps the
DOM of `page.html#selftest` and reads the JSON the page's self-test writes into
<pre id="selftest">. The expected values are computed here from the document itself.
"""

import copy
import html
import json
import os
import pathlib
import re
import shutil
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools"))
import make_sample_report  # noqa: E402

SAMPLE = json.loads(make_sample_report.SAMPLE.read_text())
TEMPLATE = make_sample_report.TEMPLATE.read_text()
SEVERITY = {"high": 0, "medium": 1, "low": 2}

CHROMIUM = os.environ.get("TRNSCOPE_CHROMIUM") or shutil.which("chromium") or shutil.which("chromium-browser")
needs_chromium = pytest.mark.skipif(
    CHROMIUM is None, reason="chromium not installed (apt-get install chromium); set TRNSCOPE_CHROMIUM to override"
)


def run_page(tmp_path, doc, name="report.html", budget_ms=5000):
    """Render `doc` in the template, run the page's self-test; returns (result, console lines)."""
    page = tmp_path / name
    page.write_text(TEMPLATE if doc is None else make_sample_report.embed(TEMPLATE, doc))
    proc = subprocess.run(
        [CHROMIUM, "--headless=new", "--disable-gpu", "--no-sandbox", "--no-first-run",
         f"--user-data-dir={tmp_path / 'profile'}", "--window-size=1400,900",
         f"--virtual-time-budget={budget_ms}", "--enable-logging=stderr", "--v=0",
         "--dump-dom", page.as_uri() + "#selftest"],
        capture_output=True, text=True, timeout=180,
    )
    m = re.search(r'<pre id="selftest"[^>]*>(.*?)</pre>', proc.stdout, re.S)
    assert m, f"no self-test output (rc={proc.returncode}); stderr tail:\n{proc.stderr[-3000:]}"
    # Chromium logs the page's console messages and uncaught errors as INFO:CONSOLE lines.
    console = [line for line in proc.stderr.splitlines() if ":CONSOLE" in line and page.name in line]
    return json.loads(html.unescape(m.group(1))), console


def check_ok(result):
    failed = {k: v for k, v in result["checks"].items() if isinstance(v, dict) and "error" in v}
    assert not failed, failed
    assert result["errors"] == []


def test_template_has_one_placeholder():
    assert TEMPLATE.count(make_sample_report.PLACEHOLDER) == 1
    assert "const DATA = /*TRNSCOPE_DATA*/null;" in TEMPLATE
    # Self-contained: no network fetches of scripts, styles or fonts.
    assert not re.search(r'<(script|link|img)[^>]+(src|href)="?(https?:)?//', TEMPLATE)
    assert "@import" not in TEMPLATE and "url(http" not in TEMPLATE


@needs_chromium
def test_sample_report(tmp_path):
    result, console = run_page(tmp_path, SAMPLE)
    assert console == []
    check_ok(result)
    checks, runs = result["checks"], SAMPLE["runs"]

    # Summary: the three runs, and every insight, sorted by severity then saving.
    assert checks["summary"]["runs"] == ["naive", "fused", "compiled"]
    expected = sorted(
        (SEVERITY[i["severity"]], -i["saving_ns"], ri, i["title"], r["name"])
        for ri, r in enumerate(runs)
        for i in r["insights"]
    )
    got = [(r["severity"], r["run"], r["title"]) for r in checks["summary"]["recommendations"]]
    assert got == [(["high", "medium", "low"][s], run, title) for s, _, _, title, run in expected]
    assert "compare" in checks["summary"]["tabs"]

    # Op table: clicking the first op with kernels lists exactly its kernels; numeric sort.
    ops = checks["ops"]
    run0 = next(r for r in runs if r["name"] == ops["run"])
    op = next(o for o in run0["ops"] if o["name"] == ops["op"])
    assert ops["kernel_rows_before"] == 0
    assert ops["kernels"] == [k["name"] for k in op["kernels"]]
    calls = [o["calls"] for o in run0["ops"]]
    assert ops["calls_desc"] == sorted(calls, reverse=True)
    assert ops["calls_asc"] == sorted(calls)
    assert ops["sort_state"] == "ascending"
    other = next(o for o in run0["ops"] if o["kernels"] and o["name"] != op["name"])
    assert ops["keyboard"] == {"op": other["name"], "kernels": [k["name"] for k in other["kernels"]]}

    # Timeline: drawn, kernels painted in their op's colour, zoom/pan move the window.
    tl = checks["timeline"]
    assert tl["run"] == "naive" and tl["events"] == len(runs[0]["timeline"]["events"])
    assert tl["opaque_pixels"] > 10_000
    assert tl["op"] == "aten::mul" and tl["op_color_pixels"] > 1_000
    assert tl["zoom"]["after"] < 0.8 * tl["zoom"]["before"]
    assert tl["pan"]["after"] < tl["pan"]["before"]
    assert tl["key_zoom"]["after"] == pytest.approx(0.7 * tl["key_zoom"]["before"])

    # Clicking the longest kernel shows its name, correlation, op and bytes; the flow chain
    # links it to its launch and op.
    events, names = runs[0]["timeline"]["events"], runs[0]["timeline"]["names"]
    kidx = max((i for i, e in enumerate(events) if e[4] == 2), key=lambda i: events[i][2])
    click = tl["click"]
    assert click["event"] == kidx and click["selected"] == kidx
    assert click["name"] == names[events[kidx][3]]
    assert click["correlation"] == str(events[kidx][5])
    op_of_corr = next(names[e[3]] for e in events if e[4] == 0 and e[5] == events[kidx][5])
    assert click["op"] == op_of_corr
    assert click["bytes"] == make_bytes(events[kidx][7])
    assert click["chain"] == 3 and click["flow_links"] == 3

    # Comparison: device-time ratios to the first run.
    base = runs[0]["totals"]["device_ns"]
    ratios = checks["compare"]["ratios"]
    assert ratios[0] is None
    assert ratios[1:] == pytest.approx([r["totals"]["device_ns"] / base for r in runs[1:]], rel=1e-9)
    assert checks["compare"]["op_rows"] == len({o["name"] for r in runs for o in r["ops"]})

    # Roofline: one mark per point and the roof drawn from the peaks.
    assert checks["roofline"]["points"] == sum(len(r["roofline"]["points"]) for r in runs)
    assert checks["roofline"]["roofs"] == 1


def make_bytes(b):
    """Python twin of Fmt.bytes for the one value the test compares."""
    units, v, i = ["B", "KiB", "MiB", "GiB", "TiB"], float(b), 0
    while v >= 1024 and i < len(units) - 1:
        v /= 1024
        i += 1
    s = str(round(v)) if i == 0 else f"{v:.2f}" if v < 10 else f"{v:.1f}" if v < 100 else f"{v:.0f}"
    return f"{s} {units[i]}"


@needs_chromium
def test_counter_lanes_are_drawn_once(tmp_path):
    # The analyzer lists each counter among the timeline's lanes (kind "counter") and in
    # "counters": the page draws it once, as a counter track, not also as an empty row.
    doc = copy.deepcopy(SAMPLE)
    tl = doc["runs"][0]["timeline"]
    tl["lanes"] += [{"name": c["name"], "kind": "counter"} for c in tl["counters"]]
    result, console = run_page(tmp_path, doc)
    assert console == []
    check_ok(result)
    got = result["checks"]["timeline"]
    assert got["event_lanes"] == [l["name"] for l in tl["lanes"] if l["kind"] != "counter"]
    assert got["counter_tracks"] == [c["name"] for c in tl["counters"]]


def test_no_data_page(tmp_path):
    result, console = run_page(tmp_path, None, name="template.html")
    assert console == []
    assert result["mode"] == "nodata" and result["problem"] is None
    assert result["errors"] == []


@needs_chromium
def test_sparse_single_run(tmp_path):
    """What a CPU-only or minimal trace gives: one run, no timeline, no peaks, no insights."""
    run = {"name": "cpu-only", "path": "t.json", "t0_ns": 0, "meta": None,
           "parse": {"events": 0, "skipped": 3, "recovered": True, "warnings": ["truncated array"]},
           "totals": {"span_ns": 0, "cpu_ops_ns": 0, "device_ns": 0, "kernels": 0, "copies": 0, "ops": 0,
                      "bytes": 0, "flops": 0, "dropped_events": 0},
           "lanes_busy": [], "ops": [], "timeline": {"lanes": [], "names": [], "events": [], "flows": [],
                                                     "counters": [], "truncated": False},
           "insights": [], "roofline": {"peak_gflops": 0, "peak_gbps": 0, "points": []}}
    doc = {"format": "trnscope.report", "version": 1, "generator": "test", "runs": [run]}
    result, console = run_page(tmp_path, doc)
    assert console == []
    check_ok(result)
    assert result["checks"]["summary"]["runs"] == ["cpu-only"]
    assert result["checks"]["summary"]["recommendations"] == []
    assert "compare" not in result["checks"]["summary"]["tabs"]
    assert result["checks"]["roofline"]["points"] == 0


@needs_chromium
def test_hostile_names_are_text(tmp_path):
    """Names come from user traces: markup and '</script>' must stay text."""
    doc = copy.deepcopy(SAMPLE)
    evil = "</script><img src=x onerror=alert(1)>aten::mul"
    run = doc["runs"][0]
    for o in run["ops"]:
        if o["name"] == "aten::mul":
            o["name"] = evil
    run["timeline"]["names"] = [evil if n == "aten::mul" else n for n in run["timeline"]["names"]]
    run["insights"][0]["ops"].append(evil)
    result, console = run_page(tmp_path, doc)
    assert console == []
    check_ok(result)
    assert result["checks"]["ops"]["op"] == evil
    assert result["checks"]["timeline"]["op"] == evil and result["checks"]["timeline"]["op_color_pixels"] > 1_000


@needs_chromium
def test_timeline_100k_events(tmp_path):
    doc = make_sample_report.stress(SAMPLE, 100_000)
    n = len(doc["runs"][0]["timeline"]["events"])
    assert n >= 100_000
    result, console = run_page(tmp_path, doc, budget_ms=20000)
    assert console == []
    check_ok(result)
    tl = result["checks"]["timeline"]
    assert tl["events"] == n and tl["opaque_pixels"] > 10_000
    # Zoomed out, tiny events merge: far fewer rectangles than events.
    assert tl["drawn"] < n / 10
    # Software rendering on a shared 2-core machine: generous, but catches O(n) per-pixel work.
    assert min(tl["draw_ms"]) < 250, tl["draw_ms"]
