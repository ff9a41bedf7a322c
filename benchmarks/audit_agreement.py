"""Does the label-free audit tell the truth? The audit and the labelled evaluation on the same documents.

For each labelled benchmark (SQuAD-LongPosQ on held-out articles, NQ oracle, evidence moving) the same
configurations are scored twice: with the benchmark's own questions, and by ``posfair audit``'s
pseudo-queries made from the benchmark's documents (both designs). Reported per benchmark and design:
Kendall's tau between the audit's and the labels' ranking of the configurations by HM and by PSI, with a
95% bootstrap interval (queries of both sides resampled within their groups), and whether the audit's
recommended strength lies within 0.15 of the labelled best-HM strength.

    python benchmarks/audit_agreement.py --documents 120 --out docs/results/audit
"""

from __future__ import annotations

import argparse
import json
import platform
from datetime import datetime, timezone
from pathlib import Path

import numpy as np
from matplotlib.figure import Figure
from scipy.stats import kendalltau
from tqdm.auto import tqdm

from posfair_llamaindex.calibration.config import CalibrationConfig
from posfair_llamaindex.cli.arguments import default_model, quiet_transformers
from posfair_llamaindex.encoding.encoder import PosFairEncoder
from posfair_llamaindex.encoding.load_config import LoadConfig
from posfair_llamaindex.encoding.sea import ChunkerConfig
from posfair_llamaindex.eval import benchmark_data as data
from posfair_llamaindex.eval.audit import audit_rows, audit_texts, recommend
from posfair_llamaindex.eval.metrics import _interval, _resample, summarise
from posfair_llamaindex.eval.plots import save_png
from posfair_llamaindex.eval.pseudo_queries import DESIGNS, texts_of
from posfair_llamaindex.eval.runner import EvalConfig, evaluate

RECOMMENDATION_TOLERANCE = 0.15


def configurations(pooling: str) -> list[EvalConfig]:
    """Nine configurations: plain, CLS-Soft at four strengths, the other two variants, dual and SEA."""
    configs = [EvalConfig.plain(pooling)]
    for strength in (0.25, 0.5, 0.75, 1.0):
        configs.append(
            EvalConfig(f"cls_soft {strength:g}", calibration=CalibrationConfig(strength=strength), pooling=pooling)
        )
    for variant in ("uniform", "cls_hard"):
        configs.append(EvalConfig(f"{variant} 0.5", calibration=CalibrationConfig(variant=variant), pooling=pooling))
    dual = CalibrationConfig(strength=1.0)
    configs.append(EvalConfig("dual max 1", mode="dual", calibration=dual, fusion="max", pooling=pooling))
    configs.append(EvalConfig("sea", mode="sea", chunker=ChunkerConfig(), pooling=pooling))
    return configs


def benchmarks(data_dir: Path, tokenizer, documents: int) -> list:
    heldout = data.heldout_article_indices(data_dir)
    return [
        data.squad_longposq(data_dir, tokenizer, max_documents=documents, questions_per_group=300, articles=heldout),
        data.nq_oracle(data_dir, tokenizer, max_sets=documents),
        data.squad_evidence_moving(data_dir, tokenizer, max_sets=documents, articles=heldout),
    ]


def _scores(per_query: dict, groups, picks=None) -> tuple[float, float]:
    chosen = per_query if picks is None else {g: per_query[g][picks[g]] for g in groups}
    summary = summarise(chosen, groups)
    return summary["hm"], summary["psi"]


def agreement(labelled, audited, samples: int, seed: int = 0) -> dict:
    """Kendall's tau of HM and of PSI over the configurations, audit against labels, with bootstrap intervals.

    The two sides hold different queries, so each is resampled within its own groups (one draw's indices
    serve every configuration of a side, which keeps the configurations paired).
    """
    groups = list(labelled.benchmark.groups)
    pairs = list(zip(labelled.results, audited.results, strict=True))

    def taus(picks=None) -> dict[str, float]:
        label_picks = None if picks is None else {g: picks[("label", g)] for g in groups}
        audit_picks = None if picks is None else {g: picks[("audit", g)] for g in groups}
        labels = [_scores(r.ndcg, groups, label_picks) for r, _ in pairs]
        audits = [_scores(a.ndcg, groups, audit_picks) for _, a in pairs]
        found = {}
        for index, key in enumerate(("hm", "psi")):
            tau = kendalltau([v[index] for v in labels], [v[index] for v in audits]).statistic
            found[key] = 0.0 if np.isnan(tau) else float(tau)
        return found

    sizes = {("label", g): len(pairs[0][0].ndcg[g]) for g in groups}
    sizes.update({("audit", g): len(pairs[0][1].ndcg[g]) for g in groups})
    draws = _resample(sizes, taus, samples, seed)
    return {key: (value, *_interval(draws[key], 0.95)) for key, value in taus().items()}


def audit_choices(rows: list[dict]) -> list[dict]:
    """The configurations `posfair audit` itself chooses from: plain, CLS-Soft strengths and dual."""
    return [r for r in rows if r["mode"] == "plain" or r["mode"] == "dual" or r["name"].startswith("cls_soft")]


def best_strength(rows: list[dict]) -> float:
    """The strength of the labelled best-HM choice (plain counts as strength 0)."""
    best = max(audit_choices(rows), key=lambda r: r["hm"][0])
    return 0.0 if best["strength"] is None else best["strength"]


def chart(entries: list[dict]) -> Figure:
    figure = Figure(figsize=(5 * len(entries) // 2 + 2, 8))
    axes = figure.subplots(2, max(1, len(entries) // 2), squeeze=False)
    for axis, entry in zip(axes.T.flat, entries, strict=False):
        x = [r["hm"][0] for r in entry["labelled_rows"]]
        y = [r["hm"][0] for r in entry["audit_rows"]]
        axis.scatter(x, y, s=18)
        for r, xi, yi in zip(entry["labelled_rows"], x, y, strict=True):
            axis.annotate(r["name"], (xi, yi), textcoords="offset points", xytext=(3, 3), fontsize=6)
        tau = entry["tau"]["hm"]
        axis.set_title(f"{entry['benchmark']}, {entry['design']}: tau(HM) {tau[0]:+.2f}", fontsize=8)
        axis.set_xlabel("labelled HM", fontsize=8)
        axis.set_ylabel("audit HM", fontsize=8)
    figure.tight_layout()
    return figure


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", default="../shared/data")
    parser.add_argument("--documents", type=int, default=120, help="documents (or rotated sets) per benchmark")
    parser.add_argument("--pooling", default="first")
    parser.add_argument("--bootstrap", type=int, default=1000)
    parser.add_argument("--cache-dir", default="posfair_eval/cache")
    parser.add_argument("--out", default="docs/results/audit")
    args = parser.parse_args()
    quiet_transformers()
    model = default_model()
    encoder = PosFairEncoder(model, pooling=args.pooling)
    configs = configurations(args.pooling)
    entries = []
    for benchmark in tqdm(benchmarks(Path(args.data), encoder.tokenizer, args.documents), desc="benchmarks"):
        print(benchmark.describe())
        labelled = evaluate(
            benchmark,
            configs,
            model=model,
            cache_dir=Path(args.cache_dir),
            bootstrap_samples=args.bootstrap,
            encoders={args.pooling: encoder},
        )
        labelled_rows = audit_rows(labelled, args.bootstrap)
        for design in DESIGNS:
            report = audit_texts(
                texts_of(benchmark),
                model,
                configs=configs,
                design=design,
                max_documents=max(args.documents, 20),
                load=LoadConfig(pooling=args.pooling),
                cache_dir=Path(args.cache_dir),
                bootstrap_samples=args.bootstrap,
                encoder=encoder,
            )
            advice = recommend(audit_choices(report.rows))
            truth = best_strength(labelled_rows)
            advised = 0.0 if advice["strength"] is None else advice["strength"]
            entry = {
                "benchmark": benchmark.name,
                "design": design,
                "documents": report.screen.sampled,
                "screen": report.screen.describe(),
                "tau": agreement(labelled, report.run, args.bootstrap),
                "recommendation": advice,
                "labelled_best_strength": truth,
                "recommendation_within_tolerance": abs(advised - truth) <= RECOMMENDATION_TOLERANCE,
                "labelled_rows": labelled_rows,
                "audit_rows": report.rows,
            }
            entries.append(entry)
            print(_summary_line(entry))
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    meta = {
        "date": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "machine": f"{platform.machine()}, {platform.processor() or 'cpu'}",
        "model": "all-MiniLM-L6-v2",
        "pooling": args.pooling,
        "documents": args.documents,
        "bootstrap": args.bootstrap,
    }
    (out / "audit-agreement.json").write_text(json.dumps({"meta": meta, "entries": entries}, indent=2) + "\n")
    markdown = table(entries)
    (out / "audit-agreement.md").write_text(markdown + "\n")
    print(markdown)
    print(f"wrote {save_png(chart(entries), out / 'audit-agreement.png')}")


def _summary_line(entry: dict) -> str:
    hm, psi = entry["tau"]["hm"], entry["tau"]["psi"]
    return (
        f"{entry['benchmark']} / {entry['design']}: tau HM {hm[0]:+.2f} [{hm[1]:+.2f}, {hm[2]:+.2f}], tau PSI "
        f"{psi[0]:+.2f} [{psi[1]:+.2f}, {psi[2]:+.2f}]; recommends {entry['recommendation']['name']}, labelled best "
        f"strength {entry['labelled_best_strength']:g}"
    )


def table(entries: list[dict]) -> str:
    head = ["benchmark", "design", "docs", "τ HM [95%]", "τ PSI [95%]", "audit recommends", "labelled best", "≤ 0.15"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for e in entries:
        hm, psi = e["tau"]["hm"], e["tau"]["psi"]
        best = max(audit_choices(e["labelled_rows"]), key=lambda r: r["hm"][0])
        lines.append(
            f"| {e['benchmark']} | {e['design']} | {e['documents']} | {hm[0]:+.2f} [{hm[1]:+.2f}, {hm[2]:+.2f}] | "
            f"{psi[0]:+.2f} [{psi[1]:+.2f}, {psi[2]:+.2f}] | {e['recommendation']['name']} | {best['name']} "
            f"(strength {e['labelled_best_strength']:g}) | {'yes' if e['recommendation_within_tolerance'] else 'no'} |"
        )
    lines += ["", "HM and PSI per configuration (labelled / audit ict / audit drop-words):", ""]
    by_benchmark: dict = {}
    for e in entries:
        by_benchmark.setdefault(e["benchmark"], []).append(e)
    for name, group in by_benchmark.items():
        lines += [
            f"**{name}**",
            "",
            "| config | labelled HM | labelled PSI | "
            + " | ".join(f"{e['design']} HM | {e['design']} PSI" for e in group)
            + " |",
            "|" + "---|" * (3 + 2 * len(group)),
        ]
        for index, row in enumerate(group[0]["labelled_rows"]):
            cells = [row["name"], f"{row['hm'][0]:.1f}", f"{row['psi'][0]:.3f}"]
            for e in group:
                audit = e["audit_rows"][index]
                cells += [f"{audit['hm'][0]:.1f}", f"{audit['psi'][0]:.3f}"]
            lines.append("| " + " | ".join(cells) + " |")
        lines.append("")
    return "\n".join(lines)


if __name__ == "__main__":
    main()
