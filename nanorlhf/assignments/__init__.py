"""The course: assignments cut from the library's own code, their hints, the handout, the answer key and the grader.

    python -m nanorlhf.assignments make OUT_DIR | hint NAME | answers NAME | grade    (nanorlhf/assignments/__main__.py)
"""
