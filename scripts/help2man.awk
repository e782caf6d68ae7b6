# Turns a command's --help (printed unwrapped, COLUMNS=1000) into the body of its man(7) page, in
# the order man pages have: SYNOPSIS (from "USAGE:"), DESCRIPTION (the discussion), then the other
# sections ("ARGUMENTS:", "OPTIONS:", "SUBCOMMANDS:"). The "OVERVIEW:" line is the NAME line, which
# scripts/man-pages writes. Option and subcommand lines ("  --flag <v>   text") become .TP items,
# and so do the rows of a table of codes ("  64   usage: ..."); other indented lines (examples)
# stay as they are (.nf); prose is left for man to fill, so it wraps cleanly at any width.
function esc(s) { gsub(/\\/, "\\e", s); sub(/^[.']/, "\\\\\\&&", s); return s }
function out(s) {
    if (part == "syn") syn = syn s "\n"
    else if (part == "desc") desc = desc s "\n"
    else rest = rest s "\n"
}
function endnf() { if (nf) { out(".fi"); nf = 0 } }
# A blank line starts a new paragraph, once something follows in the same section.
function para() { if (pp) { if (part != "desc" || desc != "") out(".PP"); pp = 0 } }
function item(line, len,    tag, text) {
    tag = substr(line, 3, len - 2); sub(/ +$/, "", tag)
    text = substr(line, len + 1)
    endnf(); pp = 0; out(".TP"); out("\\fB" esc(tag) "\\fR"); out(esc(text))
}
BEGIN { nf = 0; pp = 0; part = "desc" }
/^OVERVIEW: / { next }
/^USAGE: / { endnf(); part = "syn"; out(esc(substr($0, 8))); next }
# The usage's own continuation lines (a long one is indented under its start).
part == "syn" && /^       / { sub(/^ +/, ""); out(esc($0)); next }
part == "syn" { part = "rest" }
/^[A-Z][A-Z -]*:$/ { endnf(); pp = 0; sub(/:$/, ""); out(".SH " $0); next }
/^$/ { endnf(); pp = 1; next }
/^  [0-9]+  +/ && match($0, /^  [0-9]+  +/) { item($0, RLENGTH); next }
# Options and subcommands, only in their sections: in the description, an example with a comment
# after two spaces ("  photogate pick APP   # ...") is an example.
part == "rest" && /^  [-<a-z]/ && match($0, /^  ([^ ]( ?[^ ])*)  +/) { item($0, RLENGTH); next }
/^  / { para(); if (!nf) { out(".nf"); nf = 1 }; out(esc($0)); next }
{ endnf(); para(); out(esc($0)) }
END {
    endnf()
    printf ".SH SYNOPSIS\n%s", syn
    if (desc != "") printf ".SH DESCRIPTION\n%s", desc
    printf "%s", rest
}
