"""The kernel: errors and exit codes, YAML I/O, workspace paths, output, code identity.

Every other package may import it; it imports nothing of the project.
"""
