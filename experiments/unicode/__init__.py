"""What a reader sees of a text: Unicode folding for content fingerprints (issue 40).

Owns turning a prompt into the form two prompts share when a reader cannot tell them
apart, so the locked split cannot be spent again through invisible or look-alike
characters (DESIGN.md invariants 4, 12 and 14):

- :mod:`.fold`: the invisible characters (category Cf and the other default-ignorable
  code points), the TR39 skeleton built from the bundled ``confusables.txt`` (Unicode
  17.0.0, see :data:`.fold.CONFUSABLES_SOURCE`), and :func:`.fold.fold`, the reader's
  form (NFKC, invisible characters removed, confusables and case folded, white space
  collapsed);
- :mod:`.shingles`: character-shingle sets of folded texts and an inverted index of
  them, for the near-duplicate check against claimed test prompts.

May import: nothing of the project (the standard library only), so the loader, the
fingerprints and the registry can all use it.
"""

MAY_IMPORT: tuple[str, ...] = ()
