"""The exams: exact-value questions that can only be answered from memory.

``model``     Case and Question (the bank's types) and their serialisation.
``bank``      the synthetic bank built from the seeded chains' planted facts.
``probes``    questions mined from anyone's own imported sessions.
``readers``   who answers: the verbatim reader (offline retention ceiling),
              the searcher stand-in (open book), later a model reader.
``grading``   normalisation, aliases, decoys.
``closed``    the closed-book exam over strategies; ``open_book`` its rounds.
``stats``     bootstrap intervals, paired McNemar tests, pointer-mix sensitivity.
"""
