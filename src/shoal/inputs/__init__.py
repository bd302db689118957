"""What users give shoal, checked before anything starts: grammars, option types, file schemas."""
