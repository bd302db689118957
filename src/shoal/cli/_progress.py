"""Live progress of a sweep: a rich progress bar fed by the sweep's events."""

from __future__ import annotations

import sys

from shoal import render
from shoal.bench.sweep import Events


class Progress:
    """A rich progress bar fed by the sweep's events (silent with --json)."""

    def __init__(self, total: int, done: int, quiet: bool) -> None:
        self.total, self.done, self.quiet = total, done, quiet

    def __enter__(self) -> Events:
        if self.quiet or not sys.stderr.isatty():
            return self._plain_events()
        from rich.progress import BarColumn, MofNCompleteColumn, TextColumn, TimeElapsedColumn
        from rich.progress import Progress as Bar

        self.bar = Bar(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                            TimeElapsedColumn(), transient=True)
        self.bar.start()
        task = self.bar.add_task("starting", total=self.total, completed=self.done)
        self._task = task

        def started(config, point):
            where = f"{config.nodes} nodes, " if config.nodes > 1 else ""
            self.bar.update(task, description=f"{point.test} {render.byte_size(point.size_B)} "
                                              f"({where}{config.ranks} ranks)")

        def advance(*_):
            self.bar.advance(task)

        def failed(config, point, reason):
            self.bar.console.print(f"[red]failed[/] {point.test} {point.size_B} B: {reason}")
            self.bar.advance(task)

        return Events(point_started=started, point_done=advance, point_failed=failed,
                      point_skipped=advance)

    def work_events(self):
        """Events of workload runs (shoal.work): one step per run, failures said."""
        from shoal.work.runner import Events as WorkEvents

        bar = getattr(self, "bar", None)

        def done(row):
            if bar is not None:
                bar.update(self._task, description=f"{row['workload']} {row['size']} "
                                                   f"({row['nodes']} nodes, {row['ranks']} ranks)")
                bar.advance(self._task)

        def failed(placement, rep, reason):
            text = f"failed: {placement.label} {placement.nodes} nodes, rep {rep + 1}: {reason}"
            if bar is not None:
                bar.console.print(f"[red]{text}[/]")
                bar.advance(self._task)
            elif not self.quiet:
                print(text, file=sys.stderr)

        return WorkEvents(run_done=done, run_failed=failed)

    def _plain_events(self) -> Events:
        def failed(config, point, reason):
            if not self.quiet:
                print(f"failed {point.test} {point.size_B} B: {reason}", file=sys.stderr)

        return Events(point_failed=failed)

    def __exit__(self, *exc) -> None:
        if hasattr(self, "bar"):
            self.bar.stop()
