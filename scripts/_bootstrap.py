"""Make ``l2d_core`` importable when a script is run from anywhere, and refuse an unusable cache
folder at once: ``L2D_CACHE_DIR`` naming a file is said in one line before the script loads its
heavy packages (``--help`` still answers)."""

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

if not {"-h", "--help"} & set(sys.argv[1:]):
    from l2d_core.paths import CacheDirError, cache_dir

    where = cache_dir(create=False)
    if where.exists() and not where.is_dir():
        try:
            cache_dir()
        except CacheDirError as exc:
            print(f"error: {exc}", file=sys.stderr)
            sys.exit(2)
