"""The course: assignments cut from the library's own code, their hints, a student copy and the grader.

    python -m nanorlhf.assignments make OUT_DIR | hint NAME | grade    (nanorlhf/assignments/__main__.py)
"""
