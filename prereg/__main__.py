from prereg.cli import run

run()
