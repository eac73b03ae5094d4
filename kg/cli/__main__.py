from kg.cli import main

raise SystemExit(main())
