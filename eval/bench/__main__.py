from eval.bench.cli import main

raise SystemExit(main())
