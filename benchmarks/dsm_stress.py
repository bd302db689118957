"""libshoalsdsm's randomized stress: many seeds replayed against a sequential model.

Each seed: every client runs random reads, writes, locked writes and waits
for newer versions on chunks of 32 B, 4 KiB and 96 KiB (inline and
separate payloads); the logs are replayed (versions 1..n without gaps or
repeats, the final contents are the last write's, write holds never
overlap). Target: 1000 seeds, zero violations, under both MPIs.
"""

from wait_common import mpis, parser, verdict

from entry import run_main
import json

from shoal.dsm import apps
from shoal.errors import ShoalError
from shoal.mpi.launch import Job
from shoal.wait import apply


def main() -> int:
    p = parser(__doc__, rounds=1)
    p.add_argument("--seeds", type=int, default=1000)
    p.add_argument("--ops", type=int, default=120, help="operations per client per seed")
    p.add_argument("--mode", default="backoff")
    p.add_argument("--ranks", type=int, default=3, help="3: 1 server; 4 or more: 2 servers")
    args = p.parse_args()
    failed = 0
    for mpi in mpis(args.mpi):
        job = apply(Job(mpi, args.ranks, [str(apps.program(mpi)), "stress", "--seeds",
                                          str(args.seeds), "--ops", str(args.ops)]), args.mode)
        done = job.run()
        lines = [ln for ln in done.stdout.splitlines() if ln.startswith("{")]
        if not lines:
            raise ShoalError(f"stress under {mpi.name} failed: {done.error_line()}")
        out = json.loads(lines[-1])
        failed += out["violations"] > 0
        print(f"{mpi.name}: {out['seeds']} seeds, {out['clients']} clients, {out['servers']} "
              f"server(s), {out['operations']} operations, {out['wall_s']:.1f} s, "
              f"violations {out['violations']} (failed seeds {out['failed_seeds']})  "
              f"target 0: {verdict(out['violations'] == 0)}")
    return 1 if failed else 0


if __name__ == "__main__":
    run_main(main)
