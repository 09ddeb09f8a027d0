"""What ``lil check`` prints: per unfinished run, whether it resumes under the current code."""

from __future__ import annotations

from ..deploycheck import CheckReport, RunCheck


def run_line(r: RunCheck) -> str:
    """One run: its id (and name), then what a resume under this code would do."""
    who = r.run_id + (f" ({r.name})" if r.name else "")
    steps = f"{r.replayed} step{'' if r.replayed == 1 else 's'}"
    if r.outcome == "completes":
        what = f"resumes cleanly: replays {steps} and completes"
    elif r.outcome == "resumes":
        what = f"resumes cleanly: replays {steps}, then runs {r.key!r} fresh"
        if r.unmet:
            what += (
                f" ({len(r.unmet)} recorded step{'' if len(r.unmet) == 1 else 's'} after it "
                f"not checked: {', '.join(r.unmet[:3])}{', …' if len(r.unmet) > 3 else ''})"
            )
    elif r.outcome == "stops":
        what = f"WOULD STOP at step {r.key!r} after {steps}: {r.detail}"
    else:
        what = f"WOULD FAIL after {steps}: {r.detail}"
    if r.old_patches:
        what += "; takes the old path of patch " + ", ".join(repr(p) for p in r.old_patches)
    return f"  {who}  {r.goal}  {what}"


def check_lines(report: CheckReport) -> list[str]:
    """``lil check``: a line per run, then the verdict."""
    out = []
    if report.import_error:
        first = report.import_error.split(";", 1)[0]
        out.append(
            f"note: importing the module stopped ({first}); its durable functions "
            f"defined before that are checked"
        )
    names = ", ".join(report.functions)
    out.append(
        f"checked {len(report.runs)} unfinished run{'' if len(report.runs) == 1 else 's'} "
        f"of {names} in {report.journal} ({report.seconds:.2f}s)"
    )
    out.extend(run_line(r) for r in report.runs)
    stranded = [r for r in report.runs if r.strands]
    if stranded:
        out.append(
            f"{len(stranded)} of {len(report.runs)} runs would stop under this code: keep the "
            f"old code until they finish, put the change behind patched(), or reset/fork them "
            f"(docs/versioning.md)"
        )
    else:
        out.append("every unfinished run resumes under this code")
    return out


def patch_lines(report: CheckReport) -> list[str]:
    """``lil check --patches``: per patch met, the unfinished runs that take its old path."""
    names = dict.fromkeys(p for r in report.runs for p in (*r.old_patches, *r.new_patches))
    if not names:
        return ["no unfinished run meets a patch"]
    out = []
    for name in names:
        old = report.old_path_runs(name)
        if old:
            ids = ", ".join(r.run_id for r in old)
            runs = "run takes" if len(old) == 1 else "runs take"
            out.append(
                f"patch {name!r}: {len(old)} unfinished {runs} its old path ({ids}): keep "
                f"'if patched({name!r}): … else: …' until they finish"
            )
        else:
            out.append(
                f"patch {name!r}: no unfinished run takes its old path: "
                f"deprecate_patch({name!r}) is safe"
            )
    return out
