from retained.cli import main

raise SystemExit(main())
