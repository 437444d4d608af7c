// RunSummary's JSON, the Pareto front and the results files (results.hpp).
#include "embedlab/results.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>

#include "embedlab/error.hpp"
#include "embedlab/json_members.hpp"

namespace embedlab {

using Json = nlohmann::ordered_json;

namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

Json number_or_null(double v)
{
    return std::isfinite(v) ? Json(v) : Json();
}

// Full precision; not finite is an empty field.
std::string full(double v)
{
    if (!std::isfinite(v))
        return {};
    char buf[40];
    std::snprintf(buf, sizeof buf, "%.17g", v);
    return buf;
}

double csv_number(const std::string& field)
{
    if (field.empty())
        return kNaN;
    char* end = nullptr;
    const double v = std::strtod(field.c_str(), &end);
    return end && *end == '\0' ? v : kNaN;
}

std::string csv_field(const std::string& s)
{
    if (s.find_first_of(",\"\n\r") == std::string::npos)
        return s;
    std::string out = "\"";
    for (char c : s)
        out += c == '"' ? std::string("\"\"") : std::string(1, c);
    return out + "\"";
}

// A count read back from a file: anything but a finite number in range is 0.
int64_t to_count(double v)
{
    return std::isfinite(v) && v >= 0 && v < 9.2e18 ? static_cast<int64_t>(v) : 0;
}

// The results files' columns, in order: the CSV header and the JSON keys. Each
// is one RunSummary member: text, a count, or a number (NaN: an empty CSV field,
// JSON null).
struct Column {
    const char* name;
    std::string RunSummary::*text = nullptr;
    int64_t RunSummary::*count = nullptr;
    double RunSummary::*number = nullptr;

    // Reading a file: the field as text and as a number; the member takes the one it holds.
    void read(RunSummary& r, const std::string& as_text, double as_number) const
    {
        if (text)
            r.*text = as_text;
        else if (count)
            r.*count = to_count(as_number);
        else
            r.*number = as_number;
    }
    std::string csv(const RunSummary& r) const
    {
        return text ? csv_field(r.*text) : count ? std::to_string(r.*count) : full(r.*number);
    }
    Json json(const RunSummary& r) const
    {
        return text ? Json(r.*text) : count ? Json(r.*count) : number_or_null(r.*number);
    }
};
const Column kColumns[]{{.name = "method", .text = &RunSummary::method},
                        {.name = "parameters", .text = &RunSummary::parameters},
                        {.name = "params", .count = &RunSummary::params_after},
                        {.name = "ratio", .number = &RunSummary::ratio},
                        {.name = "ppl", .number = &RunSummary::ppl},
                        {.name = "delta_ln_ppl", .number = &RunSummary::delta_ln_ppl},
                        {.name = "cosine", .number = &RunSummary::mean_cosine},
                        {.name = "seconds", .number = &RunSummary::seconds},
                        {.name = "host", .text = &RunSummary::host},
                        {.name = "part", .text = &RunSummary::part},
                        {.name = "params_before", .count = &RunSummary::params_before},
                        {.name = "ppl_original", .number = &RunSummary::ppl_original},
                        {.name = "eval_tokens", .count = &RunSummary::eval_tokens},
                        {.name = "model", .text = &RunSummary::model},
                        {.name = "eval_text", .text = &RunSummary::eval_text},
                        {.name = "kl_mean", .number = &RunSummary::kl_mean},
                        {.name = "top1_agreement", .number = &RunSummary::top1_agreement},
                        {.name = "task", .text = &RunSummary::task},
                        {.name = "task_accuracy", .number = &RunSummary::task_accuracy},
                        {.name = "task_accuracy_original", .number = &RunSummary::task_accuracy_original},
                        {.name = "task_n", .count = &RunSummary::task_n},
                        {.name = "bytes_before", .number = &RunSummary::bytes_before},
                        {.name = "bytes_after", .number = &RunSummary::bytes_after},
                        {.name = "model_bytes_before", .number = &RunSummary::model_bytes_before},
                        {.name = "model_bytes_after", .number = &RunSummary::model_bytes_after},
                        {.name = "bits_per_byte", .number = &RunSummary::bits_per_byte},
                        {.name = "bits_per_byte_original", .number = &RunSummary::bits_per_byte_original}};
// How many columns the files of each version have, oldest first: before the part
// column, before the divergence columns, before the task columns, before the bytes
// columns, before the model bytes columns, before bits per byte, now.
constexpr size_t kColumnVersions[]{9, 15, 17, 21, 23, 25, std::size(kColumns)};

// A row's JSON object with the results files' keys.
Json row_json(const RunSummary& r)
{
    Json j = Json::object();
    for (const Column& c : kColumns)
        j[c.name] = c.json(r);
    return j;
}

// The per-window divergence arrays, when measured.
void add_windows(Json& j, const RunSummary& r)
{
    if (!r.window_kl.empty())
        j["window_kl"] = r.window_kl;
    if (!r.window_top1.empty())
        j["window_top1"] = r.window_top1;
}

std::vector<double> json_numbers(const Json& o, const char* key)
{
    std::vector<double> v;
    if (o.contains(key) && o[key].is_array())
        for (const auto& x : o[key])
            v.push_back(x.is_number() ? x.get<double>() : kNaN);
    return v;
}

double json_number(const Json& o, const char* key)
{
    return o.contains(key) && o[key].is_number() ? o[key].get<double>() : kNaN;
}

std::string json_string(const Json& o, const char* key)
{
    return o.contains(key) && o[key].is_string() ? o[key].get<std::string>() : std::string();
}

} // namespace

std::vector<std::vector<std::string>> csv_records(const std::string& csv)
{
    std::vector<std::vector<std::string>> records;
    std::vector<std::string> fields;
    std::string field;
    bool quoted = false, any = false;
    for (size_t i = 0; i < csv.size(); ++i) {
        const char c = csv[i];
        if (quoted) {
            if (c == '"' && i + 1 < csv.size() && csv[i + 1] == '"') {
                field += '"';
                ++i;
            } else if (c == '"') {
                quoted = false;
            } else {
                field += c;
            }
        } else if (c == '"') {
            quoted = any = true;
        } else if (c == ',') {
            fields.push_back(std::move(field));
            field.clear();
        } else if (c == '\n') {
            fields.push_back(std::move(field));
            records.push_back(std::move(fields));
            fields.clear();
            field.clear();
            any = false;
        } else if (c != '\r') {
            field += c;
            any = true;
        }
    }
    if (any || !fields.empty()) {
        fields.push_back(std::move(field));
        records.push_back(std::move(fields));
    }
    return records;
}

Json summary_json(const RunSummary& s)
{
    Json j;
    EMBEDLAB_JSON_MEMBERS(j, s, method, parameters, part, params_before, params_after, ratio, ppl_original,
                          ppl, delta_ln_ppl, mean_cosine, eval_tokens, seconds, host, model, eval_text,
                          kl_mean, top1_agreement, task, task_accuracy, task_accuracy_original, task_n,
                          bytes_before, bytes_after, model_bytes_before, model_bytes_after, bits_per_byte,
                          bits_per_byte_original);
    for (auto& [key, value] : j.items()) // not measured (NaN) or not finite: null
        if (value.is_number_float() && !std::isfinite(value.get<double>()))
            value = nullptr;
    add_windows(j, s);
    return j;
}

RunSummary summary_from_json(const Json& j)
{
    try {
        auto num = [&](const char* key) { return j.at(key).is_null() ? kNaN : j.at(key).get<double>(); };
        RunSummary s;
        s.method = j.at("method");
        s.parameters = j.at("parameters");
        s.part = j.at("part");
        s.params_before = j.at("params_before");
        s.params_after = j.at("params_after");
        s.ratio = num("ratio");
        s.ppl_original = num("ppl_original");
        s.ppl = num("ppl");
        s.delta_ln_ppl = num("delta_ln_ppl");
        s.mean_cosine = num("mean_cosine");
        s.eval_tokens = j.at("eval_tokens");
        s.seconds = j.at("seconds");
        s.host = j.at("host");
        s.model = j.value("model", "");
        s.eval_text = j.value("eval_text", "");
        s.kl_mean = json_number(j, "kl_mean"); // absent or null: not measured
        s.top1_agreement = json_number(j, "top1_agreement");
        s.window_kl = json_numbers(j, "window_kl");
        s.window_top1 = json_numbers(j, "window_top1");
        s.task = json_string(j, "task");
        s.task_accuracy = json_number(j, "task_accuracy");
        s.task_accuracy_original = json_number(j, "task_accuracy_original");
        s.task_n = to_count(json_number(j, "task_n"));
        s.bytes_before = json_number(j, "bytes_before"); // absent before issue 38
        s.bytes_after = json_number(j, "bytes_after");
        s.model_bytes_before = json_number(j, "model_bytes_before"); // absent before them
        s.model_bytes_after = json_number(j, "model_bytes_after");
        s.bits_per_byte = json_number(j, "bits_per_byte"); // absent before issue 60
        s.bits_per_byte_original = json_number(j, "bits_per_byte_original");
        return s;
    } catch (const nlohmann::json::exception& e) {
        throw InputError(std::string("run summary: a field is missing or mistyped (") + e.what() + ")");
    }
}

std::vector<int> pareto_front(const std::vector<RunSummary>& rows)
{
    std::vector<int> order;
    for (int i = 0; i < static_cast<int>(rows.size()); ++i)
        if (std::isfinite(rows[i].ratio) && std::isfinite(rows[i].ppl) && std::isfinite(rows[i].delta_ln_ppl))
            order.push_back(i);
    std::stable_sort(order.begin(), order.end(), [&](int a, int b) {
        if (rows[a].ratio != rows[b].ratio)
            return rows[a].ratio < rows[b].ratio;
        return rows[a].delta_ln_ppl < rows[b].delta_ln_ppl;
    });
    // Sweeping by ratio, a row is on the front when it beats every smaller-or-equal
    // ratio's delta, or repeats the last front row exactly.
    std::vector<int> front;
    for (int i : order) {
        if (front.empty() || rows[i].delta_ln_ppl < rows[front.back()].delta_ln_ppl)
            front.push_back(i);
        else if (rows[i].delta_ln_ppl == rows[front.back()].delta_ln_ppl &&
                 rows[i].ratio == rows[front.back()].ratio)
            front.push_back(i);
    }
    return front;
}

std::vector<ParetoGroup> pareto_fronts(const std::vector<RunSummary>& rows)
{
    std::vector<ParetoGroup> groups;
    for (int i = 0; i < static_cast<int>(rows.size()); ++i) {
        const auto& r = rows[i];
        auto it = std::find_if(groups.begin(), groups.end(), [&](const ParetoGroup& g) {
            return g.model == r.model && g.part == r.part && g.eval_text == r.eval_text;
        });
        if (it == groups.end()) {
            groups.push_back({r.model, r.part, r.eval_text, {}, {}});
            it = groups.end() - 1;
        }
        it->rows.push_back(i);
    }
    for (auto& g : groups) {
        std::vector<RunSummary> subset;
        for (int i : g.rows)
            subset.push_back(rows[i]);
        for (int k : pareto_front(subset))
            g.front.push_back(g.rows[k]);
    }
    return groups;
}

std::string results_csv(const std::vector<RunSummary>& rows)
{
    // Every field followed by a comma; the line's last comma becomes its newline.
    std::string out;
    for (const Column& c : kColumns)
        out += std::string(c.name) + ",";
    out.back() = '\n';
    for (const auto& r : rows) {
        for (const Column& c : kColumns)
            out += c.csv(r) + ",";
        out.back() = '\n';
    }
    return out;
}

std::string results_json(const std::vector<RunSummary>& rows)
{
    Json list = Json::array();
    for (const auto& r : rows) {
        list.push_back(row_json(r));
        add_windows(list.back(), r);
    }
    return Json{{"results", list}}.dump(4) + "\n";
}

std::vector<RunSummary> results_from_csv(const std::string& csv)
{
    const auto records = csv_records(csv);
    if (records.empty() || records[0].size() < kColumnVersions[0] || records[0][0] != "method")
        throw InputError("not a results CSV file (its first line must be the header method,parameters,...)");
    const size_t columns = records[0].size();
    // The columns of the newest version the file has; the later ones keep their defaults.
    size_t known = 0;
    for (const size_t version : kColumnVersions)
        if (columns >= version)
            known = version;
    std::vector<RunSummary> rows;
    for (size_t i = 1; i < records.size(); ++i) {
        const auto& f = records[i];
        if (f.size() != columns)
            continue;
        RunSummary r;
        r.ppl_original = kNaN; // files before the part column do not have it
        for (size_t c = 0; c < known; ++c)
            kColumns[c].read(r, f[c], csv_number(f[c]));
        rows.push_back(std::move(r));
    }
    return rows;
}

std::vector<RunSummary> results_from_json(const std::string& json)
{
    Json doc;
    try {
        doc = Json::parse(json);
    } catch (const nlohmann::json::parse_error& e) {
        throw InputError("not JSON (byte " + std::to_string(e.byte) + ": the text ends or breaks there)");
    } catch (const nlohmann::json::exception& e) { // e.g. a number beyond double
        throw InputError(std::string("not JSON (") + e.what() + ")");
    }
    if (!doc.is_object() || !doc.contains("results") || !doc["results"].is_array())
        throw InputError("not a results JSON file (it needs a \"results\" array)");
    std::vector<RunSummary> rows;
    for (const auto& o : doc["results"]) {
        if (!o.is_object())
            continue;
        RunSummary r;
        for (const Column& c : kColumns)
            c.read(r, json_string(o, c.name), json_number(o, c.name));
        r.window_kl = json_numbers(o, "window_kl");
        r.window_top1 = json_numbers(o, "window_top1");
        rows.push_back(std::move(r));
    }
    return rows;
}

} // namespace embedlab
