"""Keep a random sample of a cosmic-ray session's pending mutants; mark the rest skipped.

Usage: python .ci/mutation_sample.py SESSION.sqlite COUNT [SEED]
       python .ci/mutation_sample.py --score SESSION.sqlite

A uniform sample of a few hundred mutants estimates the kill rate of the whole
session within a few percent, in a fraction of the time (each mutant reruns the
unit tests). The same tree, COUNT and SEED give the same sample (the mutants are
ordered by what they change, not by their random job ids), so a score before and
after a change of the tests compares the same mutants. Run by `make mutation`;
needs cosmic-ray installed.
"""

import random
import sys

from cosmic_ray.work_db import use_db
from cosmic_ray.work_item import WorkerOutcome, WorkResult


def _key(item) -> tuple:
    """What a mutant is, independent of its job id (a random UUID each `cosmic-ray init`): where, which operator,
    which occurrence. Sorting by it makes a seed pick the same mutants in every session of the same tree."""
    return tuple((m.module_path.as_posix(), m.operator_name, m.occurrence, tuple(m.start_pos), tuple(m.end_pos))
                 for m in item.mutations)


def main(session: str, count: int, seed: int = 0) -> None:
    with use_db(session) as db:
        items = sorted(db.pending_work_items, key=_key)
        pending = [item.job_id for item in items]
        keep = set(random.Random(seed).sample(pending, min(count, len(pending))))
        for job_id in pending:
            if job_id not in keep:
                db.set_result(job_id, WorkResult(output="not in the sample", worker_outcome=WorkerOutcome.SKIPPED))
    print(f"kept {len(keep)} of {len(pending)} mutants (seed {seed})")


def score(session: str) -> None:
    """Print the share of the sampled mutants the tests killed, and each survivor's diff."""
    from cosmic_ray.work_item import TestOutcome

    killed, timeouts, survived, broken = 0, 0, [], 0
    with use_db(session) as db:
        for item, result in db.completed_work_items:
            if result.worker_outcome == WorkerOutcome.SKIPPED:
                continue
            if result.worker_outcome != WorkerOutcome.NORMAL:
                broken += 1  # the worker failed to run the tests at all: neither killed nor survived
                continue
            if result.test_outcome == TestOutcome.SURVIVED:
                survived.append(result.diff)
            else:
                killed += 1
                # cosmic-ray counts a test run past the timeout as killed; on a busy machine that may be
                # a slow survivor, so say how many there were
                timeouts += (result.output or "").strip() == "timeout"
    total = killed + len(survived)
    for diff in survived:
        print("\n".join(line for line in diff.splitlines() if line.startswith(("---", "+++", "@@", "-", "+"))))
    print(f"mutation score: {killed} of {total} sampled mutants killed ({100 * killed / max(total, 1):.1f}%), "
          f"{len(survived)} survived"
          + (f"; {timeouts} of the kills by timeout (rerun those on an idle machine)" if timeouts else "")
          + (f"; {broken} not run (the worker failed)" if broken else ""))


if __name__ == "__main__":
    if sys.argv[1] == "--score":
        score(sys.argv[2])
    else:
        main(sys.argv[1], int(sys.argv[2]), int(sys.argv[3]) if len(sys.argv) > 3 else 0)
