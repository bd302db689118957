"""The cluster's file server (``--storage xeon-blade=seed002-nas``): where a job's output goes.

Seed 002's clusters NFS-mounted one NAS, and its blades' ray tracing was "I/O bounded": the
image the master writes at the end cost 0.4 s of the 0.44-0.58 s a 512² render took (shoal's
``[storage.seed002-nas]`` has the derivation). An emulated device keeps its output in memory
unless its term carries ``@storage=NAME``: then a job whose rank 0 is on such a device hands
that rank ``SHOAL_STORE=ADDRESS:PORT``, and the workload program writes its output there
(native/work/store.c) through the device's link to the head, a block at a time.

The server runs in the head namespace (the seed's NAS sat on the master's switch), one per
storage profile, from ``cluster up`` to ``down``. It acknowledges each block once the
storage would have committed it (``block_B / write_Bps`` device seconds, D times that on the
host), keeps the file, and answers the whole file's byte count and CRC-32, which the writer
checks: every byte stored, or the run fails.

Protocol, one connection a file: ``STORE NAME BYTES\\n`` -> ``BLOCK B\\n``; then blocks of B
bytes (the last may be shorter), each answered by one byte ``k`` once committed; then
``DONE BYTES CRC32\\n``. A bad header is answered ``ERR why\\n``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import re
import sys
import time
import zlib
from pathlib import Path

from shoal import environment, proc
from shoal.cluster import state
from shoal.cluster import terms as spec_terms
from shoal.errors import ShoalError

SUFFIX = "storage="
PORT = 7420
_NAME = re.compile(r"^[A-Za-z0-9._-]{1,128}$")
MAX_FILE_B = 1 << 34


def parse(text: str) -> dict[str, str]:
    """``--storage xeon-blade=seed002-nas[,KIND=NAME...]``: device profile -> storage name."""
    out: dict[str, str] = {}
    for item in text.split(","):
        kind, sep, name = (part.strip() for part in item.partition("="))
        if not (kind and sep and name):
            raise ShoalError(f"--storage {text!r}: give PROFILE=STORAGE,... (e.g. xeon-blade=seed002-nas)")
        out[kind.lower()] = name
    return out


def with_storage(spec: str, given: dict[str, str]) -> str:
    """An emulate spec with ``@storage=NAME`` on every term of each profile ``given`` names."""
    from shoal.cluster import terms

    return terms.with_suffix(spec, given, lambda name: SUFFIX + name,
                             lambda word: word.startswith(SUFFIX), "--storage", "a storage")


def with_storage_study(spec: str, reference, given: dict[str, str]):
    """A study's devices and its emulated reference (``study.reference.Reference``), each
    profile ``given`` names carrying its storage; refused for a profile in neither."""
    terms = spec_terms.kinds(spec)
    on_reference = reference.profile if reference.emulated else None
    for kind, name in given.items():
        if kind not in terms and kind != on_reference:
            raise ShoalError(f"--storage {kind}={name}: neither --emulate {spec} nor the reference has "
                             f"{kind} devices; give a storage to one of: "
                             f"{', '.join(dict.fromkeys(terms + ([on_reference] if on_reference else [])))}")
    mine = {kind: name for kind, name in given.items() if kind in terms}
    if on_reference in given:
        if SUFFIX in reference.suffix:
            raise ShoalError(f"--storage {on_reference}={given[on_reference]}: --reference {reference} "
                             "already gives its devices a storage; give it once")
        reference = reference.with_suffix(f"@{SUFFIX}{given[on_reference]}")
    return (with_storage(spec, mine) if mine else spec), reference


def known(name: str, spec: str):
    """The storage profile ``name`` (``[storage.NAME]``), or one line saying which exist."""
    from shoal import profiles

    found = profiles.load_storage()
    if name not in found:
        raise ShoalError(f"--emulate {spec}: @storage={name}: no such storage (known: "
                         f"{', '.join(sorted(found)) or 'none'}); add [storage.{name}] to a profiles file")
    return found[name]


def start(cluster_id: str, nodes: list, record: dict, dilation: float, directory: Path,
          address: str) -> None:
    """One server per storage the devices name, in the head namespace at ``address``;
    recorded in ``record["storage"]`` (name -> address, port, pid), ended by down."""
    used = {node.storage.name: node.storage for node in nodes if node.storage is not None}
    servers = {}
    for i, (name, storage) in enumerate(sorted(used.items())):
        port = PORT + i
        files = directory / "storage" / name
        argv = [sys.executable, "-m", "shoal.cluster.storage", "--port", str(port),
                "--write-Bps", repr(storage.write_Bps), "--block-B", str(storage.block_B),
                "--dilation", repr(dilation), "--files", str(files),
                "--stats", str(directory / f"storage-{name}.json")]
        pid = proc.start_helper([sys.executable, "-m", "shoal.cluster.nsexec", "--cluster", cluster_id,
                                 "--run", "head", "--", *argv],
                                {environment.STATE_DIR.name: str(state.root())},
                                f"the cluster's file server {name}")
        servers[name] = {**storage.describe(), "address": address, "port": port, "pid": pid,
                         "files": str(files), "stats": str(directory / f"storage-{name}.json")}
    for node in nodes:   # in the record, so that a cluster attached to later keeps it
        if node.storage is not None:
            record["nodes"][node.name]["storage"] = node.storage.name
    if servers:
        record["storage"] = servers


def rank_env(record: dict, node: str) -> dict[str, str]:
    """What a job whose rank 0 is on device ``node`` hands its ranks: the file server the
    device writes to ({} where it keeps its output in memory)."""
    name = ((record.get("nodes") or {}).get(node) or {}).get("storage")
    if name is None:
        return {}
    server = (record.get("storage") or {}).get(name)
    if server is None:
        raise ShoalError(f"{node} writes to storage {name}, whose server is not running: bring the "
                         "cluster down and up again")
    return {environment.STORE.name: f"{server['address']}:{server['port']}"}


def counters(record: dict) -> dict:
    """Each server's files, bytes and commit time so far (from its stats file)."""
    out = {}
    for name, server in (record.get("storage") or {}).items():
        try:
            out[name] = json.loads(Path(server["stats"]).read_text())
        except (OSError, ValueError):
            out[name] = {}
    return out


# -- the server (runs in the head namespace) ---------------------------------------------------
class _Server:
    def __init__(self, write_Bps: float, block_B: int, dilation: float, files: Path, stats: Path):
        self.write_Bps, self.block_B, self.dilation = write_Bps, block_B, dilation
        self.files, self.stats_path = files, stats
        self.stats = {"files": 0, "bytes": 0, "blocks": 0, "commit_host_s": 0.0}

    def _save_stats(self) -> None:
        tmp = self.stats_path.with_suffix(".tmp")
        tmp.write_text(json.dumps(self.stats))
        tmp.replace(self.stats_path)

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            await self._one_file(reader, writer)
        except (asyncio.IncompleteReadError, ConnectionError):
            pass  # the writer went away: its run fails on its side
        finally:
            writer.close()

    async def _one_file(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        words = (await reader.readline()).decode(errors="replace").split()
        if len(words) != 3 or words[0] != "STORE" or not _NAME.match(words[1]) or not words[2].isdigit() \
                or int(words[2]) > MAX_FILE_B:
            writer.write(b"ERR give STORE NAME BYTES\n")
            await writer.drain()
            return
        name, total = words[1], int(words[2])
        writer.write(f"BLOCK {self.block_B}\n".encode())
        await writer.drain()
        crc, left = 0, total
        with open(self.files / name, "wb") as out:
            while left:
                block = await reader.readexactly(min(self.block_B, left))
                arrived = time.monotonic()
                out.write(block)
                crc = zlib.crc32(block, crc)
                left -= len(block)
                # Committed at the storage's rate: the block's device seconds, D times on the host.
                commit = len(block) / self.write_Bps * self.dilation
                await asyncio.sleep(max(0.0, arrived + commit - time.monotonic()))
                self.stats["blocks"] += 1
                self.stats["commit_host_s"] += commit
                writer.write(b"k")
                await writer.drain()
        self.stats["files"] += 1
        self.stats["bytes"] += total
        self._save_stats()
        writer.write(f"DONE {total} {crc}\n".encode())
        await writer.drain()


async def _serve(args: argparse.Namespace) -> None:
    files = Path(args.files)
    files.mkdir(parents=True, exist_ok=True)
    server = _Server(args.write_Bps, args.block_B, args.dilation, files, Path(args.stats))
    server._save_stats()
    listening = await asyncio.start_server(server.handle, host="0.0.0.0", port=args.port)
    print("ready", flush=True)
    async with listening:
        await listening.serve_forever()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m shoal.cluster.storage",
                                     description="the emulated cluster's file server (started by cluster up)")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--write-Bps", type=float, required=True)
    parser.add_argument("--block-B", type=int, required=True)
    parser.add_argument("--dilation", type=float, default=1.0)
    parser.add_argument("--files", required=True)
    parser.add_argument("--stats", required=True)
    args = parser.parse_args(argv)
    try:
        asyncio.run(_serve(args))
    except OSError as exc:
        print(f"file server: {exc.strerror or exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
