from seelen.cli import main

main()
