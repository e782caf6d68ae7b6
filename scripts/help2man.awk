# Turns a command's --help (printed unwrapped, COLUMNS=1000) into man(7) body text: "OVERVIEW:",
# "USAGE:" and "X:" headings become sections, option lines ("  --flag <v>   text") become .TP
# items, other indented lines (examples) stay as they are (.nf), and prose is left for man to fill,
# so it wraps cleanly at any width.
function esc(s) { gsub(/\\/, "\\e", s); sub(/^[.']/, "\\\\\\&&", s); return s }
BEGIN { nf = 0 }
function endnf() { if (nf) { print ".fi"; nf = 0 } }
/^OVERVIEW: / { endnf(); next }
/^USAGE: / { endnf(); print ".SH SYNOPSIS"; print esc(substr($0, 8)); next }
/^[A-Z][A-Z -]*:$/ { endnf(); sub(/:$/, ""); print ".SH " $0; next }
/^$/ { endnf(); print ".PP"; next }
/^  [-<a-z]/ && match($0, /^  ([^ ]( ?[^ ])*)  +/) {
    # an option or subcommand with its help: "  --access <access>   read-write or add-only."
    tag = substr($0, 3, RLENGTH - 2); sub(/ +$/, "", tag)
    text = substr($0, RLENGTH + 1)
    endnf(); print ".TP"; print "\\fB" esc(tag) "\\fR"; print esc(text); next
}
/^  / { if (!nf) { print ".nf"; nf = 1 }; print esc($0); next }
{ endnf(); print esc($0) }
END { endnf() }
