// Tokens as people can read them. Byte-level vocabularies hold " the" and "the",
// "\n" and "\n\n": shown raw, the first pair looks alike and the second breaks a
// label. Every space shows as '␣' (U+2423, as editors show visible whitespace),
// '\n', '\t', '\r' and '\\' as escapes, other control characters as \xNN.
// unescaped_token reads the same notation back from a search box, so a user can
// type "␣the" (or " the") and find exactly that token.
#pragma once

#include <QString>

namespace embedlab::views {

QString escaped_token(const QString& text);
QString unescaped_token(const QString& typed);

} // namespace embedlab::views
