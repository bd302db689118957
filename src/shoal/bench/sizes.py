"""The message sizes a sweep measures when none are given (grammar: shoal.inputs.grammar.sizes)."""

DEFAULT_SIZES = "1..4M"
QUICK_SIZES = "1,64,1K,16K,256K,4M"
