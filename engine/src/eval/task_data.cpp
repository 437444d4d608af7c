// Task files: GLUE TSVs (SST-2, STS-B and the other classification tasks) and
// multiple-choice JSONL.
#include <algorithm>
#include <charconv>
#include <cmath>

#include <nlohmann/json.hpp>

#include "embedlab/file_input.hpp"
#include "embedlab/tasks.hpp"
#include "embedlab/text_format.hpp"

namespace embedlab {

namespace {

std::vector<std::string> split(const std::string& line, char sep)
{
    std::vector<std::string> out;
    size_t start = 0;
    for (size_t at; (at = line.find(sep, start)) != std::string::npos; start = at + 1)
        out.push_back(line.substr(start, at - start));
    out.push_back(line.substr(start));
    return out;
}

// The file's non-empty lines, '\r' stripped, each with its 1-based line number.
std::vector<std::pair<size_t, std::string>> lines_of(const std::filesystem::path& file)
{
    const std::string bytes = io::read_regular_file(file, io::text_file_cap, "task data file");
    std::vector<std::pair<size_t, std::string>> lines;
    size_t number = 0;
    for (auto& line : split(bytes, '\n')) {
        ++number;
        if (!line.empty() && line.back() == '\r')
            line.pop_back();
        if (!line.empty())
            lines.emplace_back(number, std::move(line));
    }
    if (lines.empty())
        throw InputError(file.string() + ": the file is empty");
    return lines;
}

// A TSV: the header's columns by name, then rows with as many fields.
struct Tsv {
    std::vector<std::string> header;
    std::vector<std::pair<size_t, std::vector<std::string>>> rows;

    size_t column(const std::filesystem::path& file, std::initializer_list<const char*> names) const
    {
        for (const char* name : names)
            for (size_t i = 0; i < header.size(); ++i)
                if (header[i] == name)
                    return i;
        std::string wanted;
        for (const char* name : names)
            wanted += std::string(wanted.empty() ? "'" : "' or '") + name;
        throw InputError(file.string() + ": the header has no " + wanted +
                         "' column (it has: " + printable(joined(header)) + ")");
    }
};

Tsv read_tsv(const std::filesystem::path& file, int64_t limit)
{
    const auto lines = lines_of(file);
    Tsv t;
    t.header = split(lines.front().second, '\t');
    for (size_t i = 1; i < lines.size() && (limit <= 0 || static_cast<int64_t>(t.rows.size()) < limit); ++i) {
        auto fields = split(lines[i].second, '\t');
        if (fields.size() != t.header.size())
            throw InputError(file.string() + ":" + std::to_string(lines[i].first) + ": " +
                             std::to_string(fields.size()) + " fields, the header has " +
                             std::to_string(t.header.size()));
        t.rows.emplace_back(lines[i].first, std::move(fields));
    }
    if (t.rows.empty())
        throw InputError(file.string() + ": no rows after the header");
    return t;
}

double number(const std::string& text, const std::string& where)
{
    double v = 0;
    const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
    if (ec != std::errc() || end != text.data() + text.size() || !std::isfinite(v))
        throw InputError(where + ": '" + printable(text) + "' is not a number");
    return v;
}

TaskData read_sst2(const std::filesystem::path& file, int64_t limit)
{
    const Tsv t = read_tsv(file, limit);
    const size_t sentence = t.column(file, {"sentence", "text"}), label = t.column(file, {"label"});
    TaskData d{.task = "sst2", .source = file.string(), .examples = {}};
    for (const auto& [line, fields] : t.rows) {
        const std::string where = file.string() + ":" + std::to_string(line);
        const double l = number(fields[label], where);
        if (l != 0 && l != 1)
            throw InputError(where + ": label " + printable(fields[label]) + " is not 0 or 1");
        d.examples.push_back(
            {fields[sentence] + "\nQuestion: Is this sentence positive or negative?\nAnswer:",
             {" negative", " positive"},
             static_cast<int64_t>(l),
             fields[sentence]});
    }
    return d;
}

// A GLUE classification task's layout: the text columns, the label column and the
// labels in the Hugging Face datasets' order (numeric labels index it).
struct GlueLayout {
    const char* task;
    const char* first;
    const char* second; // nullptr: single sentences
    const char* label;
    std::vector<std::string> labels;
    bool numeric;
};

const std::vector<GlueLayout>& glue_layouts()
{
    static const std::vector<GlueLayout> t = {
        {"cola", "sentence", nullptr, "label", {"unacceptable", "acceptable"}, true},
        {"mrpc", "#1 String", "#2 String", "Quality", {"not_equivalent", "equivalent"}, true},
        {"qqp", "question1", "question2", "is_duplicate", {"not_duplicate", "duplicate"}, true},
        {"mnli", "sentence1", "sentence2", "gold_label", {"entailment", "neutral", "contradiction"}, false},
        {"mnli-mm",
         "sentence1",
         "sentence2",
         "gold_label",
         {"entailment", "neutral", "contradiction"},
         false},
        {"qnli", "question", "sentence", "label", {"entailment", "not_entailment"}, false},
        {"rte", "sentence1", "sentence2", "label", {"entailment", "not_entailment"}, false},
        {"wnli", "sentence1", "sentence2", "label", {"not_entailment", "entailment"}, true},
    };
    return t;
}

const GlueLayout* glue_layout(const std::string& task)
{
    for (const auto& g : glue_layouts())
        if (task == g.task)
            return &g;
    return nullptr;
}

// CoLA's dev and train files have no header: source, label, original label, sentence.
Tsv read_cola(const std::filesystem::path& file, int64_t limit)
{
    const auto lines = lines_of(file);
    const auto first = split(lines.front().second, '\t');
    if (std::find(first.begin(), first.end(), "sentence") != first.end())
        return read_tsv(file, limit); // a header naming its columns (other exports of CoLA)
    Tsv t;
    t.header = {"source", "label", "original_label", "sentence"};
    for (const auto& [line, text] : lines) {
        if (limit > 0 && static_cast<int64_t>(t.rows.size()) >= limit)
            break;
        auto fields = split(text, '\t');
        if (fields.size() != 4)
            throw InputError(file.string() + ":" + std::to_string(line) + ": " +
                             std::to_string(fields.size()) +
                             " fields; CoLA's rows have 4 (source, label, original label, sentence)");
        t.rows.emplace_back(line, std::move(fields));
    }
    return t;
}

TaskData read_glue_classification(const GlueLayout& g, const std::filesystem::path& file, int64_t limit)
{
    const Tsv t = g.task == std::string("cola") ? read_cola(file, limit) : read_tsv(file, limit);
    const size_t first = t.column(file, {g.first}), label = t.column(file, {g.label});
    const bool pair = g.second != nullptr;
    const size_t second = pair ? t.column(file, {g.second}) : 0;
    std::vector<std::string> continuations;
    std::string listed;
    for (const auto& name : g.labels) {
        continuations.push_back(" " + name);
        listed += (listed.empty() ? "" : ", ") + name;
    }
    TaskData d{.task = g.task, .source = file.string(), .examples = {}};
    for (const auto& [line, fields] : t.rows) {
        const std::string where = file.string() + ":" + std::to_string(line);
        const std::string& value = fields[label];
        int64_t index = -1;
        if (g.numeric) {
            const double l = number(value, where);
            if (l >= 0 && l < static_cast<double>(g.labels.size()) && l == std::floor(l))
                index = static_cast<int64_t>(l);
        } else {
            for (size_t i = 0; i < g.labels.size(); ++i)
                if (value == g.labels[i])
                    index = static_cast<int64_t>(i);
        }
        if (index < 0)
            throw InputError(where + ": label '" + printable(value) + "' is not one of " + g.task + "'s (" +
                             (g.numeric ? "0 to " + std::to_string(g.labels.size() - 1) + ": " : "") +
                             listed + ")");
        TaskExample e{.context = {}, .continuations = continuations, .label = index, .text = fields[first]};
        if (pair)
            e.text_pair = fields[second];
        d.examples.push_back(std::move(e));
    }
    return d;
}

TaskData read_multiple_choice(const std::filesystem::path& file, int64_t limit)
{
    TaskData d{.task = "mc", .source = file.string(), .examples = {}};
    for (const auto& [line, text] : lines_of(file)) {
        if (limit > 0 && static_cast<int64_t>(d.examples.size()) >= limit)
            break;
        const std::string where = file.string() + ":" + std::to_string(line);
        const auto j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
        if (!j.is_object())
            throw InputError(where + ": not a JSON object");
        if (!j.contains("context") || !j["context"].is_string())
            throw InputError(where + ": no \"context\" string");
        if (!j.contains("choices") || !j["choices"].is_array() || j["choices"].size() < 2)
            throw InputError(where + ": \"choices\" must be a list of at least two strings");
        TaskExample e{.context = j["context"].get<std::string>(), .continuations = {}, .label = 0};
        for (const auto& c : j["choices"]) {
            if (!c.is_string())
                throw InputError(where + ": every choice must be a string");
            std::string continuation(1, ' '); // appended: GCC 12 flags " " + string falsely
            continuation += c.get<std::string>();
            e.continuations.push_back(std::move(continuation));
        }
        if (!j.contains("label") || !j["label"].is_number_integer() || j["label"].get<int64_t>() < 0 ||
            j["label"].get<int64_t>() >= static_cast<int64_t>(e.continuations.size()))
            throw InputError(where + ": \"label\" must be the index of a choice (0 to " +
                             std::to_string(e.continuations.size() - 1) + ")");
        e.label = j["label"].get<int64_t>();
        e.text = e.context;
        for (const auto& c : e.continuations) // each already starts with its space
            e.text += c;
        d.examples.push_back(std::move(e));
    }
    return d;
}

} // namespace

TaskData read_task_data(const std::string& task, const std::filesystem::path& file,
                        const TaskReadOptions& options)
{
    if (task == "sst2")
        return read_sst2(file, options.limit);
    if (task == "mc")
        return read_multiple_choice(file, options.limit);
    if (const auto* g = glue_layout(task))
        return read_glue_classification(*g, file, options.limit);
    throw InputError("unknown task '" + printable(task) + "' (tasks: " + task_names + ")");
}

std::vector<SentencePair> read_sentence_pairs(const std::filesystem::path& file,
                                              const TaskReadOptions& options)
{
    const Tsv t = read_tsv(file, options.limit);
    const size_t first = t.column(file, {"sentence1"}), second = t.column(file, {"sentence2"}),
                 score = t.column(file, {"score"});
    std::vector<SentencePair> pairs;
    for (const auto& [line, fields] : t.rows) {
        const std::string where = file.string() + ":" + std::to_string(line);
        const double gold = number(fields[score], where);
        // STS-B's gold scores lie in [0, 5]; 1e30 reached training as a loss overflow and
        // was blamed on the learning rate.
        if (gold < 0 || gold > 5)
            throw InputError(where + ": score " + printable(fields[score]) +
                             " is outside STS-B's 0..5 scale");
        pairs.push_back({fields[first], fields[second], gold});
    }
    return pairs;
}

std::vector<std::string> task_texts(const std::string& task, const std::filesystem::path& file,
                                    const TaskReadOptions& options)
{
    std::vector<std::string> texts;
    if (task == "stsb") {
        for (auto& p : read_sentence_pairs(file, options)) {
            std::string both = std::move(p.first);
            both += ' ';
            both += p.second;
            texts.push_back(std::move(both));
        }
        return texts;
    }
    for (auto& e : read_task_data(task, file, options).examples) {
        if (!e.text_pair.empty()) {
            e.text += ' ';
            e.text += e.text_pair;
        }
        texts.push_back(std::move(e.text));
    }
    return texts;
}

} // namespace embedlab
