"""The bench's table: every figure of one run beside its bar, as Markdown (the README's table is this output)."""

from __future__ import annotations

from typing import Any

__all__ = ["cancel_table", "fleet_table", "table", "takeover_table"]


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
    lines += _resume_table(results)
    return lines


def _resume_table(results: dict[str, Any]) -> list[str]:
    """A fresh worker process's first resume beside the warm one in the same process, and without the warm-up."""
    lines = ["", f"Resume of a {results['steps']}-step run in a fresh worker process, to the resumed leg's first part "
             "(ms; fresh counts what start-up waited for the warm-up; warm: the same resume again in the same process; "
             "start-up: the process's start to the clock, apart):", "",
             "| back end | fresh | of which connect | fresh, connection apart | warm (same process) "
             "| fresh without the warm-up | start-up (apart) | of which Django set-up | warm-up waited / own | bar | "
             "| load a 1,000-step history (bar 20) |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for database in results["databases"]:
        resume, load = database.get("resume"), database.get("load")
        if not resume:
            continue
        figure = resume[resume["bar_figure"]]["median"]
        judged = "all in" if resume["bar_figure"] == "fresh_ms" else "connection apart"
        lines.append(
            f"| {database['label']} | {_spread(resume['fresh_ms'])} | {_spread(resume['connect_ms'])} "
            f"| {_spread(resume['fresh_connected_ms'])} | {_spread(resume['warm_resume_ms'])} "
            f"| {_spread(resume['without_warmup']['fresh_ms'])} | {_spread(resume['startup_ms'], 0)} "
            f"| {_spread(resume['django_setup_ms'], 0)} "
            f"| {resume['warmup_waited_ms']['median']:.2f} / {resume['warmup_own_ms']['median']:.2f} "
            f"| < {resume['bar_ms']:g} ({judged}) | {_verdict(figure < resume['bar_ms'])} "
            f"| {_spread(load, 2) if load else '-'} {_verdict(load['median'] < load['bar_ms']) if load else ''} |")
    return lines


def _judged(value: float, bar: float, unit: str = "ms") -> str:
    """ok, or MISSED with by how much."""
    return "ok" if value < bar else f"MISSED by {value - bar:.1f} {unit} ({value / bar:.1f}x)"


def _ms(summary: dict[str, float]) -> str:
    return f"{summary['p50']:.1f} | {summary['p99']:.1f} | {summary['max']:.1f}"


def _p99_row(latency: dict[str, float], bar: float) -> str:
    """The cells p50, p99, max, the p99 bar and its verdict."""
    return f"{_ms(latency)} | p99 < {bar:g} | {_judged(latency['p99'], bar)}"


def _leg_start_heading(title: str, columns: str, event: str, *, after: str = "") -> list[str]:
    """The title and column heads of a table of times from ``event`` to a leg's first part at a follower."""
    heads = (f"| back end | {columns} | p50 | p99 | max | bar | | {event} → claim | claim → first part written "
             f"| written → follower |{after}")
    return ["", f"{title} (ms; the breakdown is medians from the database's timestamps):", "", heads,
            "|" + "---|" * (heads.count("|") - 1)]


def _leg_start_cells(breakdown: dict[str, float]) -> str:
    """The cells from an event to a leg's first part at a follower: to the claim, to the part written, to received."""
    return (f"| {breakdown['to_claim']:.1f} | {breakdown['claim_to_part']:.1f} "
            f"| {breakdown['part_to_follower']:.1f} |")


def _mib(value: int) -> str:
    return f"{value / 2**20:.0f} MiB"


def fleet_table(results: dict[str, Any]) -> list[str]:
    """Markdown lines of the fleet parts (issue 8, items 4-6) of every database that ran them."""
    fleets = [(database["label"], database["fleet"]) for database in results["databases"] if database.get("fleet")]
    if not fleets:
        return []
    lines = []
    motions = [(label, fleet["motion"]) for label, fleet in fleets if fleet.get("motion")]
    if motions:
        lines += _leg_start_heading("Verdict to motion: the verdict's API response to the resumed leg's first part "
                                    "at a follower", "worker, woken by | channel layer | approvals", "response")
        for label, motion in motions:
            latency, parts = motion["latency_ms"], motion["breakdown_ms"]
            lines.append(
                f"| {label} | {motion['worker']}, {motion['wake']} | {motion['channel_layer']} | {latency['n']} "
                f"| {_p99_row(latency, motion['bar_ms'])} {_leg_start_cells(parts)}")
    streams = [(label, name, fleet[name]) for label, fleet in fleets for name in ("tail", "fanout") if fleet.get(name)]
    if streams:
        lines += ["", "Live tail and fan-out through one daphne and the Redis channel layer: a part's journal append "
                  "to its arrival at a follower (ms):", "",
                  "| back end | | runs | followers (SSE + WS) | parts measured | p50 | p99 | max | bar | "
                  "| every follower got every part | daphne RSS before → peak |",
                  "|---|---|---|---|---|---|---|---|---|---|---|---|"]
        for label, name, part in streams:
            latency = part["latency_ms"]
            bar = f"p99 < {part['bar_ms']:g} | {_judged(latency['p99'], part['bar_ms'])}"
            delivered = "yes" if part["every_part_delivered"] else (
                f"NO: {part['followers_incomplete']} followers short, {part['parts_missing']} parts missing, "
                f"{part['parts_repeated']} repeated")
            lines.append(
                f"| {label} | {'live tail' if name == 'tail' else 'fan-out'} | {part['runs']} "
                f"| {part['followers']} ({part['transports']['sse']} + {part['transports']['websocket']}) "
                f"| {latency['n']:,} | {_ms(latency)} | {bar} | {delivered} "
                f"| {_mib(part['server_rss_before'])} → {_mib(part['server_rss_peak'])} |")
    throughputs = [(label, fleet["throughput"]) for label, fleet in fleets if fleet.get("throughput")]
    if throughputs:
        lines += ["", "Throughput on the scale-out path (first claim to last leg's end):", "",
                  "| back end | runs × steps | workers × legs at once | seconds | runs/s | steps/s "
                  "| steps lost | steps repeated | journal gaps | runs with the wrong step count | |",
                  "|---|---|---|---|---|---|---|---|---|---|---|"]
        for label, part in throughputs:
            clean = not (part["steps_lost"] or part["steps_repeated"] or part["journal_gaps"]
                         or part["runs_with_wrong_steps"])
            lines.append(
                f"| {label} | {part['runs']:,} × {part['steps']} | {part['workers']} × {part['concurrency']} "
                f"| {part['seconds']:.1f} | {part['runs_per_second']:.1f} | {part['steps_per_second']:.0f} "
                f"| {part['steps_lost']} | {part['steps_repeated']} | {part['journal_gaps']} "
                f"| {part['runs_with_wrong_steps']} | {'ok' if clean else 'MISSED'} |")
    return lines + _scaling_table(fleets)


def _scaling_table(fleets: list[tuple[str, dict[str, Any]]]) -> list[str]:
    """The same throughput load with 1, 2 and 4 worker processes, with the CPU each step took (issue 25)."""
    scaled = [(label, fleet["throughput_scaling"]) for label, fleet in fleets if fleet.get("throughput_scaling")]
    if not scaled:
        return []
    lines = ["", "Throughput with 1, 2 and 4 worker processes, the same load (CPU per step: the workers' processes and "
             "their database backends; cores busy: that CPU over the window):", "",
             "| back end | runs × steps | workers × legs at once | seconds | steps/s | vs 1 worker "
             "| CPU ms per step: workers | database | total | cores busy (of) | steps lost | steps repeated | |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for label, parts in scaled:
        one = next((part["steps_per_second"] for part in parts if part["workers"] == 1), None)
        for part in parts:
            cpu = part["cpu_ms_per_step"]
            clean = not (part["steps_lost"] or part["steps_repeated"] or part["journal_gaps"]
                         or part["runs_with_wrong_steps"])
            ratio = f"{part['steps_per_second'] / one:.2f}x" if one else "-"
            lines.append(
                f"| {label} | {part['runs']:,} × {part['steps']} | {part['workers']} × {part['concurrency']} "
                f"| {part['seconds']:.1f} | {part['steps_per_second']:.0f} | {ratio} | {cpu['workers']:.2f} "
                f"| {cpu['database']:.2f} | {cpu['total']:.2f} | {part['cores_busy']:.2f} ({part['cpus']}) "
                f"| {part['steps_lost']} | {part['steps_repeated']} | {'ok' if clean else 'MISSED'} |")
    return lines


def cancel_table(results: dict[str, Any]) -> list[str]:
    """Markdown lines of cancel to stop (bench.cancel) for every database that ran it."""
    measured = [(database["label"], database["cancel"]) for database in results["databases"] if database.get("cancel")]
    if not measured:
        return []
    lines = ["", "Cancel to stop: a running leg's cancel, from its answer to the stream's cancelled part at a follower "
             "(ms; the breakdown is medians from the database's timestamps):", "",
             "| back end | worker | door, heard by | cancels | p50 | p95 | max | bar | | p95 from the request "
             "| answer → part written | written → follower | every run cancelled, by |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for label, part in measured:
        for door, figures in part["doors"].items():
            latency, breakdown = figures["latency_ms"], figures["breakdown_ms"]
            ended = "yes" if figures["every_run_cancelled"] else "NO"
            p95, bar = figures["p95_ms"], part["bar_ms"]
            judged = "ok" if p95 <= bar else _judged(p95, bar)
            lines.append(
                f"| {label} | {part['worker']} | {door}, {figures['wake']} | {latency['n']} | {latency['p50']:.1f} "
                f"| {p95:.1f} | {latency['max']:.1f} | p95 <= {bar:g} "
                f"| {judged} | {figures['from_request_p95_ms']:.1f} | {breakdown['to_part_written']:.1f} "
                f"| {breakdown['written_to_follower']:.1f} | {ended}, {', '.join(figures['cancelled_by'])} |")
    return lines


def takeover_table(results: dict[str, Any]) -> list[str]:
    """Markdown lines of the takeover (bench.takeover) for every database that ran it."""
    measured = [(database["label"], database["takeover"]) for database in results["databases"]
                if database.get("takeover")]
    if not measured:
        return []
    lines = _leg_start_heading("Takeover: a worker SIGKILLed mid-run, from the kill to the continuation's first part "
                               "at a follower", "lease | kills", "kill",
                               after=" legs | continued by | before: the lease | lease ÷ p50 | lease ÷ p99 |")
    for label, part in measured:
        latency, breakdown = part["latency_ms"], part["breakdown_ms"]
        lease_ms = part["lease_seconds"] * 1000
        continued = ", ".join(f"{count} {who}" for who, count in sorted(part.get("continued_by", {}).items()))
        lines.append(f"| {label} | {part['lease_seconds']} s | {latency['n']} | {_p99_row(latency, part['bar_ms'])} "
                     f"{_leg_start_cells(breakdown)} {', '.join(part['recovered_by'])} | {continued or '-'} "
                     f"| {lease_ms:.0f} | {_times(lease_ms, latency['p50'])} | {_times(lease_ms, latency['p99'])} |")
    for label, part in measured:
        by_leg, to_part = part.get("latency_by_leg_ms"), part.get("claim_to_part_by_leg_ms")
        if by_leg and to_part:
            first, later = by_leg["first"], by_leg["later"]
            lines.append(
                f"\n{label}, by the recovery leg's process: its first leg ({first['n']} kills) p50 {first['p50']:.1f}, "
                f"p99 {first['p99']:.1f} ms (claim → first part written {to_part['first']['p50']:.1f}); after another "
                f"leg ({later['n']} kills) p50 {later['p50']:.1f}, p99 {later['p99']:.1f} ms (claim → first part "
                f"written {to_part['later']['p50']:.1f}).")
    return lines


def _times(before: float, after: float) -> str:
    """How many times ``after`` goes into ``before`` (a speed-up)."""
    return f"{before / after:.0f}x" if after > 0 else "-"
