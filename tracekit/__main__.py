from tracekit.cli import main

main()
