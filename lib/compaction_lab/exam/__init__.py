"""The exams: exact-value questions that can only be answered from memory.

``exam``      the interface every exam implements (cases → grade → tables), its parameters and their
              defaults, the registry (`exam.EXAMS`) and `exam.run_exam`, which notebooks and CLI call.
``types``     Case and Question (the bank's types) and their serialisation.
``bank``      the synthetic bank built from the seeded chains' planted facts.
``probes``    questions mined from anyone's own imported sessions.
``cases``     a run's cases: the bank or mined probes, saved in the run folder.
``readers``   who answers: the verbatim reader (offline retention ceiling),
              the searcher stand-in (open book), a model reader.
``grading``   normalisation, aliases, decoys.
``closed``    the closed-book exam over strategies; ``open_book`` its rounds;
              ``recorded`` the compactions agents recorded. Each registers itself as an exam.
``stats``     bootstrap intervals, paired McNemar tests, pointer-mix sensitivity.
"""
