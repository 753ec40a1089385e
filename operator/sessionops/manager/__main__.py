from sessionops.manager.main import main

main()
