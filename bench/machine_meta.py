"""What every result file records about where and with what it was made: the date, the host and
its kernel (the GPU machines here run under gVisor, whose kernel says 4.4.0, or Firecracker, and
page faults cost differently under each), the GPU and driver (nvidia-smi), cmt's version and the
machine's fingerprint key (from `cmt`)."""
import datetime
import os
import platform
import subprocess


def _out(cmd):
    try:
        return subprocess.run(cmd, capture_output=True, text=True).stdout.strip()
    except OSError:
        return ""


def meta(cmt, argv):
    profile_path = _out([cmt, "profile", "path"])
    return {
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "host": platform.node(),
        "kernel": platform.release(),
        "gpu": _out(["nvidia-smi", "--query-gpu=name,driver_version", "--format=csv,noheader"]),
        "cmt_version": _out([cmt, "--version"]),
        "fingerprint": os.path.basename(profile_path)[:-len(".toml")] if profile_path.endswith(".toml") else "",
        "command": " ".join(argv),
    }
