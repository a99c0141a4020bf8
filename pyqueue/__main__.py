from pyqueue.cli import main

main()
