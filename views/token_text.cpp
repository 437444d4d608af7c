#include "token_text.hpp"

namespace embedlab::views {

namespace {
const QChar kVisibleSpace(0x2423);
} // namespace

QString escaped_token(const QString& text)
{
    QString out;
    out.reserve(text.size() + 4);
    for (const QChar c : text) {
        switch (c.unicode()) {
        case ' ':
            out += kVisibleSpace;
            break;
        case '\n':
            out += "\\n";
            break;
        case '\t':
            out += "\\t";
            break;
        case '\r':
            out += "\\r";
            break;
        case '\\':
            out += "\\\\";
            break;
        default:
            if (c.unicode() < 0x20 || c.unicode() == 0x7f)
                out += QString("\\x%1").arg(c.unicode(), 2, 16, QChar('0'));
            else
                out += c;
        }
    }
    return out;
}

QString unescaped_token(const QString& typed)
{
    QString out;
    for (qsizetype i = 0; i < typed.size(); ++i) {
        const QChar c = typed[i];
        if (c == kVisibleSpace) {
            out += ' ';
            continue;
        }
        if (c != '\\' || i + 1 >= typed.size()) {
            out += c;
            continue;
        }
        const QChar n = typed[i + 1];
        if (n == 'n' || n == 't' || n == 'r' || n == '\\') {
            out += n == 'n' ? QChar('\n') : n == 't' ? QChar('\t') : n == 'r' ? QChar('\r') : QChar('\\');
            ++i;
        } else if (n == 'x' && i + 3 < typed.size()) {
            bool ok = false;
            const int code = typed.mid(i + 2, 2).toInt(&ok, 16);
            if (ok) {
                out += QChar(code);
                i += 3;
            } else {
                out += c;
            }
        } else {
            out += c;
        }
    }
    return out;
}

} // namespace embedlab::views
