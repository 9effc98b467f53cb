from seelen.cli.main import main

main()
