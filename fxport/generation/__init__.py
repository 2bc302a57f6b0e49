"""Models fxport builds for a task (``fxport convert CHECKPOINT --task ...``).

Their ``forward`` is model code, not fxport's machinery: the control-flow converter converts it as
it converts the user's own files (:func:`fxport.frames.is_user_file`).
"""
