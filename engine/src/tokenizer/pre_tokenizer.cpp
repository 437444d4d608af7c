#include "tokenizer/pre_tokenizer.hpp"

#include <unicode/uchar.h>

#include "tokenizer/text_util.hpp"

namespace embedlab::tokenizer_impl {
namespace {

enum class CharClass { letter, number, space, other };

CharClass classify(int32_t cp)
{
    if (cp < 0)
        return CharClass::other; // ill-formed byte
    if (cp < 0x80) {
        // Fast path for ASCII, which is most of the text.
        const auto c = static_cast<char>(cp);
        if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'))
            return CharClass::letter;
        if (c >= '0' && c <= '9')
            return CharClass::number;
        if (c == ' ' || (c >= '\t' && c <= '\r'))
            return CharClass::space;
        return CharClass::other;
    }
    // \s is the Unicode White_Space property (as in the regex engines used by
    // GPT-2, tiktoken and Hugging Face); \p{L} and \p{N} are general categories.
    if (u_isUWhiteSpace(cp))
        return CharClass::space;
    switch (u_charType(cp)) {
    case U_UPPERCASE_LETTER:
    case U_LOWERCASE_LETTER:
    case U_TITLECASE_LETTER:
    case U_MODIFIER_LETTER:
    case U_OTHER_LETTER:
        return CharClass::letter;
    case U_DECIMAL_DIGIT_NUMBER:
    case U_LETTER_NUMBER:
    case U_OTHER_NUMBER:
        return CharClass::number;
    default:
        return CharClass::other;
    }
}

struct Scanned {
    CharClass cls;
    int length;
};

Scanned scan(std::string_view text, size_t pos)
{
    const CodePoint cp = next_code_point(text, pos);
    return {classify(cp.value), cp.length};
}

// End of the run of characters of class `cls` starting at `pos`.
size_t run_end(std::string_view text, size_t pos, CharClass cls)
{
    while (pos < text.size()) {
        const Scanned s = scan(text, pos);
        if (s.cls != cls)
            break;
        pos += s.length;
    }
    return pos;
}

// Length of 's 't 're 've 'm 'll 'd at pos (case-sensitive, as in the pattern), or 0.
size_t contraction_length(std::string_view text, size_t pos)
{
    if (text[pos] != '\'' || pos + 1 >= text.size())
        return 0;
    const char a = text[pos + 1];
    if (a == 's' || a == 't' || a == 'm' || a == 'd')
        return 2;
    if (pos + 2 >= text.size())
        return 0;
    const char b = text[pos + 2];
    if ((a == 'r' && b == 'e') || (a == 'v' && b == 'e') || (a == 'l' && b == 'l'))
        return 3;
    return 0;
}

// End of the piece that starts at `pos`.
size_t piece_end(std::string_view text, size_t pos)
{
    if (const size_t n = contraction_length(text, pos))
        return pos + n;

    // " ?\p{L}+", " ?\p{N}+", " ?[^\s\p{L}\p{N}]+": an optional ASCII space
    // followed by a run of one class.
    const Scanned first = scan(text, pos);
    if (text[pos] == ' ' && pos + 1 < text.size()) {
        const Scanned second = scan(text, pos + 1);
        if (second.cls != CharClass::space)
            return run_end(text, pos + 1, second.cls);
    }
    if (first.cls != CharClass::space)
        return run_end(text, pos, first.cls);

    // "\s+(?!\S)|\s+": a whitespace run, less its last character when a
    // non-space follows (that character then leads the next piece), unless
    // the run is a single character.
    size_t end = pos;
    size_t last_start = pos;
    while (end < text.size()) {
        const Scanned s = scan(text, end);
        if (s.cls != CharClass::space)
            break;
        last_start = end;
        end += s.length;
    }
    if (end < text.size() && last_start > pos)
        return last_start;
    return end;
}

bool is_line_break(char c)
{
    return c == '\r' || c == '\n';
}

char ascii_lower(char c)
{
    return c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c;
}

// (?i:'s|'t|'re|'ve|'m|'ll|'d) at pos, ASCII case folded: its length, or 0.
size_t folded_contraction_length(std::string_view text, size_t pos)
{
    if (text[pos] != '\'' || pos + 1 >= text.size())
        return 0;
    const char a = ascii_lower(text[pos + 1]);
    if (a == 's' || a == 't' || a == 'm' || a == 'd')
        return 2;
    if (pos + 2 >= text.size())
        return 0;
    const char b = ascii_lower(text[pos + 2]);
    if ((a == 'r' && b == 'e') || (a == 'v' && b == 'e') || (a == 'l' && b == 'l'))
        return 3;
    return 0;
}

} // namespace

size_t llama3_piece_end(std::string_view text, size_t pos, int max_digits)
{
    if (const size_t n = folded_contraction_length(text, pos))
        return pos + n;
    const Scanned first = scan(text, pos);
    const size_t next = pos + static_cast<size_t>(first.length);
    // [^\r\n\p{L}\p{N}]?\p{L}+
    if (first.cls == CharClass::letter)
        return run_end(text, pos, CharClass::letter);
    if (first.cls != CharClass::number && !is_line_break(text[pos]) && next < text.size() &&
        scan(text, next).cls == CharClass::letter)
        return run_end(text, next, CharClass::letter);
    // \p{N}{1,3} (Qwen2: \p{N})
    if (first.cls == CharClass::number) {
        size_t end = next;
        for (int n = 1; n < max_digits && end < text.size(); ++n) {
            const Scanned s = scan(text, end);
            if (s.cls != CharClass::number)
                break;
            end += static_cast<size_t>(s.length);
        }
        return end;
    }
    //  ?[^\s\p{L}\p{N}]+[\r\n]*
    size_t other = pos;
    if (text[pos] == ' ' && next < text.size() && scan(text, next).cls == CharClass::other)
        other = next;
    if (scan(text, other).cls == CharClass::other) {
        size_t end = run_end(text, other, CharClass::other);
        while (end < text.size() && is_line_break(text[end]))
            ++end;
        return end;
    }
    // A whitespace run: \s*[\r\n]+ ends after its last line break; else \s+(?!\S)
    // leaves its last character to the next piece (unless it is the only one or the
    // text ends), and \s+ takes the rest.
    size_t end = pos, last_start = pos, after_line_break = 0;
    while (end < text.size()) {
        const Scanned s = scan(text, end);
        if (s.cls != CharClass::space)
            break;
        last_start = end;
        end += static_cast<size_t>(s.length);
        if (is_line_break(text[last_start]))
            after_line_break = end;
    }
    if (after_line_break > 0)
        return after_line_break;
    if (end < text.size() && last_start > pos)
        return last_start;
    return end;
}

size_t gpt2_piece_end(std::string_view text, size_t pos)
{
    return piece_end(text, pos);
}

std::vector<std::string_view> split_gpt2_pattern(std::string_view text)
{
    std::vector<std::string_view> pieces;
    pieces.reserve(text.size() / 4 + 1);
    for (size_t pos = 0; pos < text.size();) {
        const size_t end = piece_end(text, pos);
        pieces.push_back(text.substr(pos, end - pos));
        pos = end;
    }
    return pieces;
}

std::vector<std::string_view> split_digits(std::string_view text, bool individual_digits)
{
    std::vector<std::string_view> pieces;
    for_each_digit_split(text, individual_digits, [&](std::string_view p) { pieces.push_back(p); });
    return pieces;
}

void for_each_digit_split(std::string_view text, bool individual_digits,
                          const std::function<void(std::string_view)>& piece)
{
    size_t start = 0; // start of the pending non-digit piece
    for (size_t pos = 0; pos < text.size();) {
        const Scanned s = scan(text, pos);
        if (s.cls != CharClass::number) {
            pos += s.length;
            continue;
        }
        if (pos > start)
            piece(text.substr(start, pos - start));
        const size_t end = individual_digits ? pos + s.length : run_end(text, pos, CharClass::number);
        piece(text.substr(pos, end - pos));
        start = pos = end;
    }
    if (start < text.size())
        piece(text.substr(start));
}

} // namespace embedlab::tokenizer_impl
