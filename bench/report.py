"""The bench's table: every figure of one run beside its bar, as Markdown (the README's table is this output)."""

from __future__ import annotations

from typing import Any

__all__ = ["table"]


def _spread(value: dict[str, float], digits: int = 2) -> str:
    return f"{value['median']:.{digits}f} [{value['min']:.{digits}f}-{value['max']:.{digits}f}]"


def _verdict(ok: bool) -> str:
    return "ok" if ok else "MISSED"


def table(results: dict[str, Any]) -> list[str]:
    """Markdown lines: overhead with its floor, growth and bytes, the worker's leg, resume, load."""
    databases = results["databases"]
    repeats = results["repeats"]
    lines = [
        f"Durable overhead per step, {results['steps']} steps, one tool call a step (ms, median [min-max] of {repeats}):",
        "",
        "| back end | overhead per step | floor (INSERT+COMMIT, same commits) | ratio | bar | |",
        "|---|---|---|---|---|---|",
    ]
    for database in databases:
        for row in database["overhead"]:
            lines.append(
                f"| {row['label']} | {_spread(row['overhead_ms'])} | {_spread(row['floor_ms'])} | {row['ratio']:.1f}x "
                f"| < {row['bar']} | {_verdict(row['overhead_ms']['median'] < row['bar'])} |"
            )
    lines += [
        "",
        "| back end | store's wait per step | this process's CPU per step | statements per save "
        "| growth (steps 191-200 / 1-10, bar 1.1) | bytes stored / final history (bar 2x) |",
        "|---|---|---|---|---|---|",
    ]
    for database in databases:
        for row in database["overhead"]:
            lines.append(
                f"| {row['label']} | {_spread(row['save_wait_ms'])} | {_spread(row['cpu_ms'])} "
                f"| {row['statements_per_save']:.1f} "
                f"| {_spread(row['growth'])} {_verdict(row['growth']['median'] <= 1.1)} "
                f"| {row['bytes_ratio']:.2f}x ({row['stored_bytes']:,} B / {row['history_bytes']:,} B) "
                f"{_verdict(row['bytes_ratio'] < 2.0)} |"
            )
    lines += ["", "As the worker runs a leg (journal on, streamed text, lease, close):", "",
              "| back end | overhead per step | bar | |", "|---|---|---|---|"]
    for database in databases:
        leg = database.get("leg")
        if leg:
            lines.append(f"| {database['label']} | {_spread(leg['overhead_ms'])} | < {leg['bar_ms']} "
                         f"| {_verdict(leg['overhead_ms']['median'] < leg['bar_ms'])} |")
    lines += ["", f"Resume of a {results['steps']}-step run in a fresh process, to the resumed leg's first part (ms):", "",
              "| back end | resume (connect included) | of which connect | interpreter + Django start-up (apart) "
              "| bar | | load a 1,000-step history (bar 20) |",
              "|---|---|---|---|---|---|---|"]
    for database in databases:
        resume, load = database.get("resume"), database.get("load")
        if resume:
            lines.append(
                f"| {database['label']} | {_spread(resume['resume_ms'])} | {_spread(resume['connect_ms'])} "
                f"| {_spread(resume['startup_ms'], 0)} | < {resume['bar_ms']} "
                f"| {_verdict(resume['resume_ms']['median'] < resume['bar_ms'])} "
                f"| {_spread(load, 2) if load else '-'} {_verdict(load['median'] < load['bar_ms']) if load else ''} |"
            )
    return lines
