#!/usr/bin/env python3
"""Write report_sample.html: the explorer template with the sample report data embedded.

For looking at the explorer without traces or a build:
    python3 tools/make_sample_report.py            # -> report_sample.html
    python3 tools/make_sample_report.py --stress 100000 -o report_stress.html

--stress N repeats the first run's timeline until it holds at least N events (a size check
for the timeline). The real reports come from `trnscope report TRACE... -o report.html`.
"""

import argparse
import copy
import json
import pathlib

ROOT = pathlib.Path(__file__).resolve().parents[1]
TEMPLATE = ROOT / "core/analysis/reports/explorer/explorer.html"
SAMPLE = ROOT / "core/analysis/reports/explorer/sample_data.json"
PLACEHOLDER = "/*TRNSCOPE_DATA*/null"


def embed(template: str, doc: dict) -> str:
    """Substitute the JSON for the placeholder, escaped so that it cannot close the <script>."""
    if template.count(PLACEHOLDER) != 1:
        raise ValueError(f"template must contain {PLACEHOLDER!r} exactly once")
    text = json.dumps(doc, ensure_ascii=False, separators=(",", ":"))
    text = text.replace("</", "<\\/").replace("\u2028", "\\u2028").replace("\u2029", "\\u2029")
    return template.replace(PLACEHOLDER, text)


def stress(doc: dict, min_events: int) -> dict:
    """Repeat run 0's timeline (events, flows, counters) back to back until min_events."""
    doc = copy.deepcopy(doc)
    tl = doc["runs"][0]["timeline"]
    base_events, base_flows = tl["events"], tl["flows"]
    period = max(e[1] + e[2] for e in base_events) + 50_000
    events, flows, points = [], [], []
    rep = 0
    while len(events) < min_events:
        off, shift = rep * period, len(events)
        events += [[e[0], e[1] + off, e[2], e[3], e[4], e[5] and e[5] + rep * 1_000_000] + e[6:] for e in base_events]
        flows += [[a + shift, b + shift] for a, b in base_flows]
        for c in tl["counters"][:1]:
            points += [[t + off, v] for t, v in c["points"]]
        rep += 1
    tl["events"], tl["flows"] = events, flows
    if tl["counters"]:
        tl["counters"][0]["points"] = points
    doc["runs"][0]["totals"]["span_ns"] = rep * period
    return doc


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("-o", "--out", default="report_sample.html")
    ap.add_argument("--data", default=str(SAMPLE), help="report JSON to embed (default: the sample)")
    ap.add_argument("--stress", type=int, default=0, metavar="N", help="repeat run 0's timeline to N events")
    args = ap.parse_args()
    doc = json.loads(pathlib.Path(args.data).read_text())
    if args.stress:
        doc = stress(doc, args.stress)
    out = pathlib.Path(args.out)
    out.write_text(embed(TEMPLATE.read_text(), doc))
    print(f"wrote {out} ({out.stat().st_size / 1e6:.1f} MB)")


if __name__ == "__main__":
    main()
