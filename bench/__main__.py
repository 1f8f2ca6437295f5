"""``python -m bench``: run the benchmarks (see ``bench/run.py``)."""
from bench.run import main

raise SystemExit(main())
