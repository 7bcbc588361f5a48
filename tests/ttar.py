"""Extract a ``ttar`` text archive (the format of prometheus/procfs' and node_exporter's sysfs fixtures, see
their ``ttar`` script): ``Directory: PATH``, ``Path: PATH`` + ``Lines: N`` + N content lines (a last line
ending in ``EOF`` has no newline; ``NULLBYTE`` stands for a NUL byte), ``SymlinkTo: TARGET``, ``Mode: NNN``.
Used to turn the real /sys/class/infiniband trees of those fixtures into directories the collectors read."""

from __future__ import annotations

from pathlib import Path


def extract(archive: Path, dest: Path, strip: str = "") -> None:
    """Write the tree of ``archive`` under ``dest``, removing the ``strip`` prefix from every path."""
    lines = archive.read_text(encoding="utf-8").splitlines()
    i, current = 0, None
    while i < len(lines):
        line = lines[i]
        if line.startswith("Directory: "):
            current = None
            (dest / line[len("Directory: ") :].removeprefix(strip)).mkdir(parents=True, exist_ok=True)
        elif line.startswith("Path: "):
            current = dest / line[len("Path: ") :].removeprefix(strip)
        elif line.startswith("Lines: ") and current is not None:
            n = int(line[len("Lines: ") :])
            body = lines[i + 1 : i + 1 + n]
            text = "".join(b + "\n" for b in body)
            if text.endswith("EOF\n"):
                text = text[: -len("EOF\n")]
            current.parent.mkdir(parents=True, exist_ok=True)
            current.write_bytes(text.replace("NULLBYTE", "\0").encode())
            i += n
        elif line.startswith("SymlinkTo: ") and current is not None:
            current.parent.mkdir(parents=True, exist_ok=True)
            current.symlink_to(line[len("SymlinkTo: ") :])
        i += 1
