from prereg.cli import main

main()
