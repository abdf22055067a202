from revdiff.tools.cli import main

main()
