"""python -m tierbench.fidelity: a study's fidelity table (tierbench.fidelity.study)."""

from .study import main

raise SystemExit(main())
