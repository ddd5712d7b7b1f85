from retained.entry import main

raise SystemExit(main())
