// The method panel's generated pages (method_panel.hpp, issue 59 item 3): a widget per
// field of each registry method, by the field's type and doc, and the request read from
// and shown in them through set_request_field and request_field_value.
#include "checked_spin_box.hpp"
#include "method_panel.hpp"

#include "embedlab/accounting.hpp"
#include "embedlab/experiment_request.hpp"
#include "embedlab/quant_types.hpp"

#include <algorithm>
#include <climits>
#include <cmath>
#include <optional>

#include <nlohmann/json.hpp>

#include <QCheckBox>
#include <QComboBox>
#include <QDoubleSpinBox>
#include <QHBoxLayout>
#include <QLabel>
#include <QLineEdit>
#include <QScrollArea>
#include <QScrollBar>
#include <QSpinBox>
#include <QStackedWidget>
#include <QStandardItemModel>

namespace embedlab::app {

namespace {

using Json = nlohmann::ordered_json;

// The workbench's first values where they differ from the method's example (the
// engine's are for a 768-wide model or the paper's settings; these run in seconds on
// the bundled model): pca and svd rank 32, tt eps 0.3 on the most balanced shape,
// lle keep 0.5 and k 8, fourier 300 steps, flat remaining 0.5 of 32 windows of 128
// tokens, quant q8_0.
const Json& workbench_defaults()
{
    static const Json defaults = Json::parse(R"({
        "pca": {"rank": 32}, "svd": {"rank": 32},
        "tt": {"shape": [], "ranks": [], "eps": 0.3},
        "lle": {"keep_ratio": 0.5, "k": 8},
        "fourier": {"mlp": "linear", "steps": 300},
        "quant": {"type": "q8_0"},
        "flat": {"remaining": 0.5, "samples": 32, "seqlen": 128}})");
    return defaults;
}

// The box texts the panel had before its pages were generated (the sweep messages and
// the tests read them); other fields: "<label> = " and their unit.
struct Presentation {
    const char* prefix;
    const char* suffix;
};
std::optional<Presentation> presentation(const std::string& field)
{
    static const std::map<std::string, Presentation> known{
        {"rank", {"rank k = ", ""}},       {"eps", {"eps = ", ""}},
        {"keep_ratio", {"keep ", ""}},     {"k", {"k = ", ""}},
        {"steps", {"", " steps"}},         {"remaining", {"remaining ", ""}},
        {"target_ratio", {"target ", ""}}, {"samples", {"", " windows"}},
        {"seqlen", {"of ", " tokens"}}};
    if (const auto it = known.find(field); it != known.end())
        return it->second;
    return std::nullopt;
}

// A field of the request (experiment_request.hpp), not a chain step's own (trim's coverage).
bool is_request_field(const std::string& field)
{
    const auto& known = request_fields();
    return std::find(known.begin(), known.end(), field) != known.end();
}

// What the empty value of an optional choice means.
QString empty_choice_text(const std::string& field)
{
    if (field == "store")
        return "f32";
    if (field == "device")
        return "nu and tau";
    return "none";
}

// Digits a number box needs to hold `values` exactly (2..8).
int decimals_for(std::initializer_list<double> values)
{
    int n = 2;
    for (double v : values)
        while (n < 8 && std::abs(std::round(v * std::pow(10.0, n)) - v * std::pow(10.0, n)) > 1e-6)
            ++n;
    return n;
}

std::optional<std::vector<int64_t>> integer_list(const QString& text)
{
    std::vector<int64_t> out;
    const QString t = text.trimmed();
    if (t.isEmpty())
        return out;
    for (const QString& part : t.split(',')) {
        bool ok = false;
        const qlonglong v = part.trimmed().toLongLong(&ok);
        if (!ok)
            return std::nullopt;
        out.push_back(v);
    }
    return out;
}

QString list_text(const Json& v)
{
    QStringList parts;
    if (v.is_array())
        for (const auto& x : v)
            parts << QString::number(x.get<int64_t>());
    return parts.join(",");
}

// A field's value as its widget holds it (null: nothing readable).
Json widget_value(const QWidget* w, RequestFieldType type)
{
    if (const auto* s = qobject_cast<const CheckedSpinBox*>(w))
        return Json(int64_t{s->value()});
    if (const auto* d = qobject_cast<const CheckedDoubleSpinBox*>(w))
        return Json(d->value());
    if (const auto* c = qobject_cast<const QCheckBox*>(w))
        return Json(c->isChecked());
    if (const auto* c = qobject_cast<const QComboBox*>(w))
        return Json(c->currentData().toString().toStdString());
    if (const auto* e = qobject_cast<const QLineEdit*>(w)) {
        if (type == RequestFieldType::Integers) {
            const auto list = integer_list(e->text());
            return list ? Json(*list) : Json();
        }
        return Json(e->text().trimmed().toStdString());
    }
    return Json();
}

void show_value(QWidget* w, const Json& v)
{
    if (auto* s = qobject_cast<CheckedSpinBox*>(w); s && v.is_number())
        s->setValue(static_cast<int>(std::clamp<double>(v.get<double>(), INT_MIN, INT_MAX)));
    else if (auto* d = qobject_cast<CheckedDoubleSpinBox*>(w); d && v.is_number())
        d->setValue(v.get<double>());
    else if (auto* c = qobject_cast<QCheckBox*>(w); c && v.is_boolean())
        c->setChecked(v.get<bool>());
    else if (auto* c = qobject_cast<QComboBox*>(w); c && v.is_string()) {
        int i = c->findData(QString::fromStdString(v.get<std::string>()));
        if (i < 0 && v.get<std::string>() == empty_choice_text(w->objectName().toStdString()).toStdString())
            i = c->findData(QString()); // store "f32": the empty choice, f32
        if (i >= 0)
            c->setCurrentIndex(i);
    } else if (auto* e = qobject_cast<QLineEdit*>(w)) {
        if (v.is_array())
            e->setText(list_text(v));
        else if (v.is_string())
            e->setText(QString::fromStdString(v.get<std::string>()));
    }
}

// Whether the doc's applies_with holds for `r`: {"mlp": "geglu"} that mlp is geglu,
// {"ranks": []} / {"remaining": 0} that the field is unset, {"target_ratio": 0.5} set.
bool applies(const FieldDoc& doc, const CompressionRequest& r)
{
    if (doc.applies_with.empty())
        return true;
    const Json with = Json::parse(doc.applies_with);
    for (const auto& [field, want] : with.items()) {
        const Json got = request_field_value(r, field);
        if (want.is_string() || want.is_boolean()) {
            if (got != want)
                return false;
        } else if (want.is_array()) {
            if (got.empty() != want.empty())
                return false;
        } else if (want.is_number()) {
            const bool zero = got.is_number() && got.get<double>() == 0;
            if (zero != (want.get<double>() == 0))
                return false;
        }
    }
    return true;
}

int64_t product(const std::vector<int64_t>& shape)
{
    int64_t p = 1;
    for (int64_t v : shape)
        p = v > 0 && p <= INT64_MAX / v ? p * v : -1;
    return p;
}

// A ggml type's blocks divide d (any other choice fits).
bool fits_width(const QString& choice, int d)
{
    const auto* t = find_quant_type(choice.toStdString());
    return d <= 0 || !t || d % t->block_values == 0;
}

// A field widget's tooltip: the doc's help, its range for width d, the sweep grammar.
QString field_tip(RequestFieldType type, const FieldDoc& doc, int d)
{
    QString tip = QString::fromStdString(doc.help);
    if (const std::string range = field_range_text(doc, d); !range.empty())
        tip += QString::fromStdString(": " + range);
    if (doc.required)
        tip += " (required)";
    if (type == RequestFieldType::Integer || type == RequestFieldType::Number)
        tip += "\nA sweep runs once per value: a list 8,16,32 or a range start:stop:step, 8:128:8";
    return tip;
}

} // namespace

QWidget* MethodPanel::fieldWidget(const MethodDescriptor& m, const std::string& field, const FieldDoc& doc,
                                  QWidget* page)
{
    const RequestFieldType type = request_field_type(field);
    // The first value: the workbench's, else the method's example, else the request's default.
    Json first = request_field_value(CompressionRequest{}, field);
    if (!m.example.empty())
        if (const Json example = Json::parse(m.example); example.contains(field))
            first = example[field];
    if (const Json& wb = workbench_defaults(); wb.contains(m.name) && wb[m.name].contains(field))
        first = wb[m.name][field];
    return typedFieldWidget(field, type, doc, first, page);
}

QWidget* MethodPanel::typedFieldWidget(const std::string& field, RequestFieldType type, const FieldDoc& doc,
                                       const Json& first, QWidget* page)
{
    const QString name = QString::fromStdString(field), label = QString::fromStdString(doc.label);
    const QString tip = field_tip(type, doc, dimension_);
    QWidget* w = nullptr;
    if (field == "freq_text")
        w = frequency_text_; // the shared rows, shown for the methods that read them
    else if (field == "calib_text")
        w = calibration_text_;
    else if (type == RequestFieldType::Integer || type == RequestFieldType::Number) {
        // The panel's old texts for a field as every method reads it; a method's own label else.
        const auto shown = is_request_field(field) && doc.label == default_field_doc(field).label
                               ? presentation(field)
                               : std::nullopt;
        const QString prefix = shown ? shown->prefix : label + " = ";
        const QString suffix = shown              ? shown->suffix
                               : doc.unit.empty() ? QString()
                                                  : " " + QString::fromStdString(doc.unit);
        const bool zero = !doc.zero.empty();
        if (type == RequestFieldType::Integer) {
            auto* s = new CheckedSpinBox(page);
            double lo = doc.ranged ? doc.lo + (doc.lo_open ? 1 : 0) : 0;
            double hi = !doc.ranged       ? double(INT_MAX)
                        : doc.hi_is_width ? (dimension_ > 0 ? dimension_ : double(INT_MAX))
                                          : doc.hi - (doc.hi_open ? 1 : 0);
            if (zero && lo > 0)
                lo = 0;
            s->setRange(static_cast<int>(std::clamp<double>(lo, INT_MIN, INT_MAX)),
                        static_cast<int>(std::clamp<double>(hi, INT_MIN, INT_MAX)));
            if (zero && lo == 0)
                s->setSpecialValueText(prefix + QString::fromStdString(doc.zero)); // "IVF lists = automatic"
            s->setPrefix(prefix);
            s->setSuffix(suffix);
            s->setSweepable(true);
            connect(s, &QSpinBox::textChanged, this, &MethodPanel::showRuns);
            connect(s, &CheckedSpinBox::problemChanged, this, &MethodPanel::showProblem);
            connect(s, &QSpinBox::valueChanged, this, &MethodPanel::showApplies);
            w = s;
        } else {
            auto* s = new CheckedDoubleSpinBox(page);
            const double v = first.is_number() ? first.get<double>() : 0;
            const int decimals = decimals_for({v, doc.lo, doc.hi_is_width ? 1.0 : std::min(doc.hi, 1e12)});
            const double step = std::pow(10.0, -decimals);
            double lo = doc.ranged ? doc.lo + (doc.lo_open ? step : 0) : -1e12;
            const double hi = !doc.ranged ? 1e12 : std::min(doc.hi - (doc.hi_open ? step : 0), 1e12);
            if (zero && lo > 0)
                lo = 0;
            s->setDecimals(decimals);
            s->setRange(lo, hi);
            s->setSingleStep(hi <= 1 ? 0.05 : hi <= 100 ? 0.1 : 1);
            if (zero && lo == 0)
                s->setSpecialValueText(prefix + QString::fromStdString(doc.zero)); // "IVF lists = automatic"
            s->setPrefix(prefix);
            s->setSuffix(suffix);
            s->setSweepable(true);
            connect(s, &QDoubleSpinBox::textChanged, this, &MethodPanel::showRuns);
            connect(s, &CheckedDoubleSpinBox::problemChanged, this, &MethodPanel::showProblem);
            connect(s, &QDoubleSpinBox::valueChanged, this, &MethodPanel::showApplies);
            w = s;
        }
    } else if (type == RequestFieldType::Bool) {
        auto* c = new QCheckBox(label, page);
        connect(c, &QCheckBox::toggled, this, &MethodPanel::showApplies);
        w = c;
    } else if (type == RequestFieldType::String && !doc.choices.empty()) {
        auto* c = new QComboBox(page);
        const QString empty = empty_choice_text(field);
        if (!doc.required)
            c->addItem(empty, QString());
        for (const auto& choice : doc.choices)
            if (doc.required || QString::fromStdString(choice) != empty)
                c->addItem(QString::fromStdString(choice), QString::fromStdString(choice));
        connect(c, &QComboBox::currentIndexChanged, this, &MethodPanel::showApplies);
        w = c;
    } else if (type == RequestFieldType::Integers || type == RequestFieldType::String) {
        auto* e = new QLineEdit(page);
        e->setPlaceholderText(QString::fromStdString(doc.value_name.empty() ? doc.label : doc.value_name));
        e->setClearButtonEnabled(true);
        e->setMinimumWidth(90); // the placeholder elides; the tooltip has the whole of it
        connect(e, &QLineEdit::textChanged, this, [this] {
            showApplies();
            showProblem();
        });
        w = e;
    } else {
        return nullptr; // token ids: not typed into a panel
    }
    if (w == frequency_text_ || w == calibration_text_)
        return w;
    if (auto* s = qobject_cast<QAbstractSpinBox*>(w)) {
        // Sized for a 6-digit number, not the range's end (1e12 is 13 digits and 2 decimals):
        // a longer one scrolls inside its box; the pca row fits 1366 px (issue 61).
        const auto* i = qobject_cast<QSpinBox*>(w);
        const auto* d = qobject_cast<QDoubleSpinBox*>(w);
        const QString widest =
            (i ? i->prefix() : d->prefix()) + (i ? "000000" : "000000.00") + (i ? i->suffix() : d->suffix());
        const int fit = s->fontMetrics().horizontalAdvance(widest) + 2 * s->fontMetrics().height() + 8;
        if (s->sizeHint().width() > fit)
            s->setMaximumWidth(fit);
    }
    w->setObjectName(name);
    w->setToolTip(tip);
    w->setProperty("field_label", label);
    show_value(w, first);
    if (auto* e = qobject_cast<QLineEdit*>(w))
        e->setProperty("initial_text", e->text());
    return w;
}

void MethodPanel::buildPages()
{
    QStringList tips;
    for (const auto& m : method_registry()) {
        auto* w = new QWidget(this);
        auto* layout = new QHBoxLayout(w);
        layout->setContentsMargins(0, 0, 0, 0);
        MethodPage p{m.name, w, {}};
        for (const auto& field : m.fields) {
            const FieldDoc& doc = method_field_doc(m, field);
            QWidget* box = fieldWidget(m, field, doc, w);
            if (!box)
                continue;
            p.fields.push_back({field, box, &doc});
            if (box == frequency_text_ || box == calibration_text_)
                continue;
            if (qobject_cast<QComboBox*>(box) || qobject_cast<QLineEdit*>(box)) {
                auto* label = new QLabel(box->property("field_label").toString(), w);
                label->setToolTip(box->toolTip());
                layout->addWidget(label);
            }
            layout->addWidget(box, qobject_cast<QLineEdit*>(box) ? 1 : 0);
        }
        layout->addStretch(1);
        // A page wider than the window scrolls sideways rather than widening the window
        // (issue 61: the tt and flat pages were 1600 px wide); its height stays the row's.
        options_->addWidget(scrollPage(w, QString::fromLatin1(m.name) + "_page"));
        pages_.push_back(std::move(p));
        method_->addItem(QString::fromLatin1(m.name));
        method_->setItemData(method_->count() - 1, QString::fromLatin1(m.summary), Qt::ToolTipRole);
        tips << QString("%1: %2").arg(m.name, m.summary);
    }
    method_->setToolTip(tips.join("\n"));
}

QScrollArea* MethodPanel::scrollPage(QWidget* w, const QString& name)
{
    auto* scroll = new QScrollArea(this);
    scroll->setObjectName(name);
    scroll->setFrameShape(QFrame::NoFrame);
    scroll->setWidgetResizable(true);
    scroll->setVerticalScrollBarPolicy(Qt::ScrollBarAlwaysOff);
    scroll->setHorizontalScrollBarPolicy(Qt::ScrollBarAsNeeded);
    scroll->setWidget(w);
    scroll->setFixedHeight(w->sizeHint().height() + scroll->horizontalScrollBar()->sizeHint().height());
    scroll->setSizePolicy(QSizePolicy::Ignored, QSizePolicy::Fixed);
    return scroll;
}

const MethodPanel::MethodPage* MethodPanel::page(const std::string& method) const
{
    for (const auto& p : pages_)
        if (p.method == method)
            return &p;
    return nullptr;
}

QWidget* MethodPanel::box(const std::string& method, const std::string& field) const
{
    if (const auto* p = page(method))
        for (const auto& f : p->fields)
            if (f.field == field)
                return f.widget;
    return nullptr;
}

Json MethodPanel::fieldValue(const FieldWidget& f, RequestFieldType type) const
{
    if (f.widget == frequency_text_ || f.widget == calibration_text_)
        return Json(textOf(qobject_cast<QLineEdit*>(f.widget)).toStdString());
    return widget_value(f.widget, type);
}

void MethodPanel::readPage(const MethodPage& p, CompressionRequest& r,
                           const std::map<std::string, double>& with, bool raw) const
{
    for (const auto& f : p.fields) {
        const RequestFieldType type = request_field_type(f.field);
        Json v = fieldValue(f, type);
        if (const auto it = with.find(f.field); it != with.end())
            v = type == RequestFieldType::Integer ? Json(static_cast<int64_t>(it->second)) : Json(it->second);
        if (v.is_null())
            continue; // a list that is none: listProblem() says so
        try {
            set_request_field(r, f.field, v);
        } catch (const std::exception&) {
        }
    }
    if (raw)
        return;
    // A field that does not apply with the others stays at its default (twice: one
    // put back may take another's condition away, as target_ratio no_mlp's).
    const CompressionRequest defaults;
    for (int pass = 0; pass < 2; ++pass)
        for (const auto& f : p.fields)
            if (!applies(*f.doc, r))
                set_request_field(r, f.field, request_field_value(defaults, f.field));
}

void MethodPanel::showPage(const MethodPage& p, const CompressionRequest& r)
{
    const CompressionRequest defaults;
    for (const auto& f : p.fields) {
        const Json v = request_field_value(r, f.field);
        if (f.widget == frequency_text_ || f.widget == calibration_text_) {
            showText(qobject_cast<QLineEdit*>(f.widget), v.get<std::string>());
            continue;
        }
        // The engine's "not set" value the box cannot hold (rank 0, no steps) leaves it.
        if (v.is_number() && v == request_field_value(defaults, f.field) &&
            !field_value_allowed(*f.doc, v, dimension_))
            continue;
        show_value(f.widget, v);
    }
}

void MethodPanel::showApplies()
{
    for (const auto& p : pages_) {
        CompressionRequest r;
        r.method = p.method;
        readPage(p, r, {}, true);
        for (const auto& f : p.fields)
            f.widget->setEnabled(applies(*f.doc, r));
    }
    showProblem();
}

QString MethodPanel::listProblem() const
{
    const QString shown = chainShown() ? registryStep() : method();
    if (const auto* p = page(shown.toStdString()))
        for (const auto& f : p->fields)
            if (auto* e = qobject_cast<QLineEdit*>(f.widget);
                e && e->isEnabled() && request_field_type(f.field) == RequestFieldType::Integers &&
                !integer_list(e->text()))
                return QString("%1 '%2' is not a comma list of integers (8,8,12)")
                    .arg(QString::fromStdString(f.doc->label), e->text().trimmed());
    return {};
}

void MethodPanel::setDimension(int d)
{
    dimension_ = d;
    if (d > 0)
        lora_rank_->setMaximum(d); // LoRA r is 1..d too
    for (const auto& p : pages_) {
        for (const auto& f : p.fields) {
            if (f.doc->hi_is_width && d > 0) {
                if (auto* s = qobject_cast<CheckedSpinBox*>(f.widget))
                    s->setMaximum(d);
                // The range in the tooltip says d (a marked box shows its problem or sweep instead).
                const QString tip = field_tip(request_field_type(f.field), *f.doc, d);
                f.widget->setProperty("plain_tooltip", tip);
                if (!f.widget->property("marked").toBool())
                    f.widget->setToolTip(tip);
            }
            // A type whose blocks do not divide d cannot be chosen (check_request would refuse it).
            if (auto* c = qobject_cast<QComboBox*>(f.widget)) {
                auto* model = qobject_cast<QStandardItemModel*>(c->model());
                for (int i = 0; i < c->count(); ++i) {
                    const auto* t = find_quant_type(c->itemText(i).toStdString());
                    const bool fits = fits_width(c->itemText(i), d);
                    model->item(i)->setEnabled(fits);
                    model->item(i)->setToolTip(fits ? QString()
                                                    : QString("its blocks of %1 values do not divide d = %2")
                                                          .arg(t ? t->block_values : 0)
                                                          .arg(d));
                }
                if (!model->item(c->currentIndex())->isEnabled()) {
                    const int q8 = c->findData("q8_0");
                    c->setCurrentIndex(q8 >= 0 ? q8 : 0);
                }
            }
        }
        // A shape still as the page began that is not one of d: the most balanced of d, and
        // ranks one per mode clipped to it.
        auto* shape = qobject_cast<QLineEdit*>(box(p.method, "shape"));
        if (!shape || d <= 0 || shape->text() != shape->property("initial_text").toString())
            continue;
        const auto old = integer_list(shape->text());
        if (!old || old->empty() || product(*old) == d)
            continue;
        std::vector<int64_t> fitted;
        try {
            fitted = balanced_tt_shape(d, "shape");
        } catch (const std::exception&) {
            continue;
        }
        QStringList text;
        for (int64_t v : fitted)
            text << QString::number(v);
        shape->setText(text.join(","));
        shape->setProperty("initial_text", shape->text());
        auto* ranks = qobject_cast<QLineEdit*>(box(p.method, "ranks"));
        const auto r = ranks ? integer_list(ranks->text()) : std::nullopt;
        if (ranks && r && r->size() == fitted.size() &&
            ranks->text() == ranks->property("initial_text").toString()) {
            QStringList clipped;
            for (size_t i = 0; i < fitted.size(); ++i)
                clipped << QString::number(std::min((*r)[i], fitted[i]));
            ranks->setText(clipped.join(","));
            ranks->setProperty("initial_text", ranks->text());
        }
    }
    showApplies();
}

} // namespace embedlab::app
