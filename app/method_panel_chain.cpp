// The method panel's chains (method_panel.hpp, issue 60 "Stacking"): Then... and its
// step, trim's page, the chain in words, and the engine's pipeline request Run queues.
#include "checked_spin_box.hpp"
#include "method_panel.hpp"

#include "embedlab/experiment_request.hpp"
#include "embedlab/pipeline_request.hpp"
#include "embedlab/trim.hpp"
#include "embedlab/trim_fields.hpp"

#include <algorithm>

#include <QComboBox>
#include <QHBoxLayout>
#include <QLabel>
#include <QLineEdit>
#include <QPushButton>
#include <QScrollArea>
#include <QStackedWidget>

namespace embedlab::app {

namespace {

using Json = nlohmann::ordered_json;

// A chain's step the registry does not list: trim, the pipeline's own first step.
bool is_trim_step(const QString& step)
{
    return !step.isEmpty() && !find_method(step.toStdString());
}

// A value a step leaves out: a number at 0 ("off") or an empty text.
bool not_given(const Json& v)
{
    return v.is_null() || (v.is_number() && v.get<double>() == 0) ||
           (v.is_string() && v.get<std::string>().empty());
}

// Shows `v` in a trim box: a spin box's number, a text box's text.
void show_step_value(QWidget* box, const Json& v)
{
    if (auto* i = qobject_cast<QSpinBox*>(box); i && v.is_number())
        i->setValue(static_cast<int>(std::clamp<double>(v.get<double>(), 0, INT_MAX)));
    else if (auto* d = qobject_cast<QDoubleSpinBox*>(box); d && v.is_number())
        d->setValue(v.get<double>());
    else if (auto* e = qobject_cast<QLineEdit*>(box); e && v.is_string())
        e->setText(QString::fromStdString(v.get<std::string>()));
}

} // namespace

const QString MethodPanel::kTrimStep = "trim";

void MethodPanel::buildChain(QHBoxLayout* row)
{
    // Trim's page, built as the registry's pages are, from the engine's declarations of its fields.
    auto* w = new QWidget(this);
    auto* layout = new QHBoxLayout(w);
    layout->setContentsMargins(0, 0, 0, 0);
    layout->addWidget(new QLabel("trim:", w));
    for (const MethodField& f : trim_fields()) {
        QWidget* box = typedFieldWidget(f.name, f.type, f.doc, f.default_value, w);
        trim_fields_.push_back({f.name, box, &f.doc});
        if (box != frequency_text_)
            box->setProperty("chain_step", kTrimStep); // a step's field, not the request's
        if (box == frequency_text_)
            continue; // the shared frequency row
        if (auto* s = qobject_cast<CheckedSpinBox*>(box))
            s->setSweepable(false); // a chain runs one setting
        else if (auto* d = qobject_cast<CheckedDoubleSpinBox*>(box))
            d->setSweepable(false);
        if (qobject_cast<QLineEdit*>(box)) {
            auto* label = new QLabel(box->property("field_label").toString(), w);
            label->setToolTip(box->toolTip());
            layout->addWidget(label);
        }
        layout->addWidget(box, qobject_cast<QLineEdit*>(box) ? 1 : 0);
        if (auto* e = qobject_cast<QLineEdit*>(box))
            connect(e, &QLineEdit::textChanged, this, &MethodPanel::showChain);
        else if (auto* s = qobject_cast<QSpinBox*>(box))
            connect(s, &QSpinBox::valueChanged, this, &MethodPanel::showChain);
        else if (auto* d = qobject_cast<QDoubleSpinBox*>(box))
            connect(d, &QDoubleSpinBox::valueChanged, this, &MethodPanel::showChain);
    }
    trim_page_ = scrollPage(w, kTrimStep + "_page");
    trim_page_->setSizePolicy(QSizePolicy::Preferred, QSizePolicy::Fixed);
    trim_page_->setMinimumWidth(w->sizeHint().width());
    trim_page_->hide();
    method_->addItem(kTrimStep);
    method_->setItemData(method_->count() - 1,
                         "Vocabulary trimming: a chain's first step (Then... adds the method after it)",
                         Qt::ToolTipRole);

    then_ = new QPushButton("Then...", this);
    then_->setObjectName("then");
    then_->setToolTip("Add a step after this method, run with it as one job with one record (a chain: "
                      "trim, then one method, then its store type)");
    then_row_ = new QWidget(this);
    auto* then_layout = new QHBoxLayout(then_row_);
    then_layout->setContentsMargins(0, 0, 0, 0);
    then_method_ = new QComboBox(then_row_);
    then_method_->setObjectName("then_method");
    for (int i = 0; i < method_->count(); ++i)
        then_method_->addItem(method_->itemText(i));
    auto* remove = new QPushButton("\u00d7", then_row_);
    remove->setObjectName("remove_then");
    remove->setToolTip("Remove this step");
    remove->setMaximumWidth(28);
    then_layout->addWidget(new QLabel("\u2192 then", then_row_));
    then_layout->addWidget(then_method_);
    then_layout->addWidget(remove);
    then_row_->hide();
    row->insertWidget(row->indexOf(method_) + 1, then_row_);
    row->insertWidget(row->indexOf(then_row_) + 1, then_);
    chain_label_ = new QLabel(this);
    chain_label_->setObjectName("chain_label");
    chain_label_->setWordWrap(true);
    chain_label_->setToolTip("The chain's steps as its results row names them; a trimmed chain evaluates the "
                             "whole evaluation text (each model tokenizes it its own way)");
    chain_label_->hide();
    connect(then_, &QPushButton::clicked, this, [this] {
        setThen(then_method_->itemText(0));
        then_method_->setFocus();
    });
    connect(remove, &QPushButton::clicked, this, [this] {
        setThen({});
        then_->setFocus();
    });
    connect(then_method_, &QComboBox::currentTextChanged, this, [this] { showOptionsFor(method()); });
}

QString MethodPanel::thenMethod() const
{
    return then_row_ && !then_row_->isHidden() ? then_method_->currentText() : QString();
}

void MethodPanel::setThen(const QString& method)
{
    if (!method.isEmpty())
        then_method_->setCurrentText(method);
    then_row_->setVisible(!method.isEmpty());
    then_->setVisible(method.isEmpty());
    showOptionsFor(this->method());
}

bool MethodPanel::chainShown() const
{
    return !thenMethod().isEmpty() || is_trim_step(method());
}

bool MethodPanel::chainTrims() const
{
    return then_row_ && (is_trim_step(method()) || is_trim_step(thenMethod()));
}

QString MethodPanel::registryStep() const
{
    for (const QString& step : {method(), thenMethod()})
        if (find_method(step.toStdString()))
            return step;
    return {};
}

std::optional<Json> MethodPanel::chainSteps(QString* problem) const
{
    if (!chainShown())
        return std::nullopt;
    // The steps as the JSON request names them, the model and evaluation fields at the top
    // (pipeline_from_json joins them to the method step's and checks them there).
    Json json = {{"model", "-"}}; // the window's model: a placeholder the request requires
    Json steps = Json::array();
    QStringList names{method()};
    if (!thenMethod().isEmpty())
        names << thenMethod();
    for (const QString& name : names) {
        Json step = {{"method", name.toStdString()}};
        if (const auto* m = find_method(name.toStdString())) {
            const Json full = request_json(request(name));
            const auto& takes = m->fields;
            for (const auto& [key, value] : full.items()) {
                if (key == "model" || key == "method")
                    continue;
                if (std::find(takes.begin(), takes.end(), key) != takes.end())
                    step[key] = value;
                else
                    json[key] = value;
            }
        } else {
            for (const auto& f : trim_fields_)
                if (const Json v = fieldValue(f, trim_field(f.field).type); !not_given(v))
                    step[f.field] = v;
        }
        steps.push_back(step);
    }
    // A trimmed chain evaluates the whole text: the original and the trimmed model tokenize it
    // each their own way, so a count of tokens would not be the same text (check_pipeline_request).
    if (std::any_of(names.begin(), names.end(), is_trim_step)) {
        json.erase("eval_tokens");
        // Trim alone evaluates its text with trim's own window.
        if (!find_method(registryStep().toStdString())) {
            Json kept = Json::object();
            for (const char* key : {"model", "eval_text"})
                if (json.contains(key))
                    kept[key] = json[key];
            json = kept;
        }
    }
    json["pipeline"] = steps;
    try {
        const PipelineRequest p = pipeline_from_json(json);
        if (p.trim)
            check_trim_options(*p.trim);
        if (!p.request.method.empty() && dimension_ > 0)
            check_request(p.request, dimension_);
        json = pipeline_json(p); // the engine's own form of it, as the CLI's --then writes it
    } catch (const std::exception& e) {
        if (problem)
            *problem = QString::fromUtf8(e.what());
    }
    json["model"] = "";
    return json;
}

void MethodPanel::setChain(const Json& chain)
{
    Json named = chain;
    named["model"] = "-"; // the window's model
    const PipelineRequest p = pipeline_from_json(named);
    const QString table = QString::fromStdString(p.request.method);
    const int eval_tokens = eval_tokens_->value();
    if (!table.isEmpty())
        setRequest(p.request); // its page and the evaluation fields
    else
        showText(eval_text_, p.request.eval_text);
    eval_tokens_->setValue(eval_tokens);
    Json trim = Json::object();
    for (const auto& step : p.steps)
        if (!find_method(step.value("method", "")))
            trim = step;
    for (const auto& f : trim_fields_) {
        const Json not_given_value =
            trim_field(f.field).type == RequestFieldType::String ? Json("") : Json(0);
        show_step_value(f.widget, trim.contains(f.field) ? trim[f.field] : not_given_value);
    }
    setMethod(p.trim ? kTrimStep : table);
    setThen(p.trim ? table : QString());
}

std::optional<Json> MethodPanel::chainJson() const
{
    return chainSteps(nullptr);
}

QString MethodPanel::chainProblem() const
{
    QString problem;
    chainSteps(&problem);
    return problem;
}

QString MethodPanel::chainLabel() const
{
    const auto json = chainJson();
    if (!json)
        return {};
    try {
        Json named = *json;
        named["model"] = "-";
        return QString::fromStdString(pipeline_label(pipeline_from_json(named)));
    } catch (const std::exception&) {
        QStringList steps{method()};
        if (!thenMethod().isEmpty())
            steps << thenMethod();
        return steps.join(" \u2192 ");
    }
}

void MethodPanel::showChain()
{
    if (!chain_label_)
        return;
    trim_page_->setVisible(chainTrims());
    options_->setVisible(!registryStep().isEmpty());
    showProblem(); // and the chain in words
}

} // namespace embedlab::app
