"""A session's records and the views of them: the folder (session), the append-only journal,
the git workspace where every candidate is a commit, the fold of the journal into history,
the candidates in flight, and what is read back out (sessions show, the closing summary,
the HTML/markdown report). A change to what a session stores or shows goes here.
"""
