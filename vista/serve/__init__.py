"""``vista serve``: the tumor-board dashboard over a graph store — a cohort page, one page per patient (variables with
their citations, the TOA timeline by episode, lab trends, the summary note, similar patients, a question box), and
every value one click from its source events. Read-only, token-protected, loopback by default; `vista.serve.export`
writes the same pages as self-contained HTML (a board packet). See docs/vista-serve.md.
"""
