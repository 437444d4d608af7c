#include "checked_spin_box.hpp"

#include <QFocusEvent>
#include <QKeyEvent>
#include <QLineEdit>
#include <algorithm>
#include <type_traits>

#include "embedlab/error.hpp"
#include "embedlab/sweep_list.hpp"

namespace embedlab::app {

namespace {

// The number the user typed, without prefix and suffix.
QString typed_number(const QString& text, const QString& prefix, const QString& suffix)
{
    QString body = text;
    if (!prefix.isEmpty() && body.startsWith(prefix))
        body.remove(0, prefix.size());
    if (!suffix.isEmpty() && body.endsWith(suffix))
        body.chop(suffix.size());
    return body.trimmed();
}

QString out_of_range(const QString& prefix, const QString& value, const QString& lo, const QString& hi)
{
    const QString what = prefix.trimmed().isEmpty() ? QString("value") : prefix.trimmed();
    return QString("%1 %2 is outside %3..%4").arg(what, value, lo, hi);
}

// Red frame and the problem as tooltip, blue and the values for a sweep, or back
// to normal.
void show_state(QAbstractSpinBox* box, const QString& problem, const QList<double>& sweep,
                const QString& text = {})
{
    const bool marked = !problem.isEmpty() || !sweep.isEmpty(), was = box->property("marked").toBool();
    if (marked && !was) { // the box's own tooltip and width, for when it is plain again
        box->setProperty("plain_tooltip", box->toolTip());
        box->setProperty("plain_width", box->minimumWidth());
    }
    box->setProperty("marked", marked);
    // A sweep is longer than the numbers the box was sized for: it grows to show it all.
    const int plain_width = box->property("plain_width").toInt();
    if (marked && !text.isEmpty())
        box->setMinimumWidth(std::max(plain_width, box->fontMetrics().horizontalAdvance(text) +
                                                       2 * box->fontMetrics().height() + 8));
    else if (!marked && was)
        box->setMinimumWidth(plain_width);
    if (!problem.isEmpty()) {
        box->setStyleSheet("QAbstractSpinBox { border: 2px solid #b00000; }");
        box->setToolTip(problem);
    } else if (!sweep.isEmpty()) {
        QStringList values;
        for (double v : sweep.mid(0, 12))
            values << QString::number(v, 'g', 12);
        if (sweep.size() > 12)
            values << "...";
        box->setStyleSheet("QAbstractSpinBox { border: 2px solid #2060c0; }");
        box->setToolTip(QString("A sweep of %1 runs: %2").arg(sweep.size()).arg(values.join(", ")));
    } else if (was) {
        box->setStyleSheet({});
        box->setToolTip(box->property("plain_tooltip").toString());
    }
}

// What a sweep's messages call the box: its prefix ("rank k ="), else its name.
QString label_of(const QAbstractSpinBox* box, const QString& prefix)
{
    if (!prefix.trimmed().isEmpty())
        return prefix.trimmed();
    return box->objectName().isEmpty() ? QString("value") : box->objectName();
}

} // namespace

template <class Base, class Derived> CheckedBox<Base, Derived>::CheckedBox(QWidget* parent) : Base(parent)
{
    QObject::connect(this, &Base::valueChanged, this, [this] {
        if (!this->hasFocus())
            setProblem({});
    });
}

template <class Base, class Derived>
QValidator::State CheckedBox<Base, Derived>::validate(QString& text, int& pos) const
{
    const QString body = typed_number(text, this->prefix(), this->suffix());
    auto* self = const_cast<CheckedBox*>(this);
    // A sweep, or text that is no number: never Acceptable, so Qt leaves value() and
    // the text alone; the sweep grammar's values, or its problem.
    const auto as_sweep = [&] {
        QString problem;
        const QList<double> values = sweepOf(body, &problem);
        in_sweep_ = true;
        setProblem(problem);
        show_state(self, problem_, values, text);
        return QValidator::Intermediate;
    };
    if (sweepable_ && embedlab::is_sweep_text(body.toStdString()))
        return as_sweep();
    if (in_sweep_) { // a number again (typed, stepped to or set): no sweep's frame or problem
        in_sweep_ = false;
        setProblem({});
        show_state(self, problem_, {});
    }
    bool ok = false;
    if constexpr (std::is_same_v<Base, QSpinBox>) {
        const qlonglong v = body.toLongLong(&ok);
        if (ok && (v < this->minimum() || v > this->maximum())) {
            setProblem(out_of_range(this->prefix(), body, QString::number(this->minimum()),
                                    QString::number(this->maximum())));
            return QValidator::Intermediate; // the typed text stays
        }
    } else {
        const double v = this->locale().toDouble(body, &ok);
        if (ok && (v < this->minimum() || v > this->maximum())) {
            setProblem(out_of_range(this->prefix(), body, this->textFromValue(this->minimum()),
                                    this->textFromValue(this->maximum())));
            return QValidator::Intermediate;
        }
    }
    const auto state = Base::validate(text, pos);
    // A sweepable box keeps any text typed between its prefix and suffix ("a:b" on
    // its way, "abc"), marked, rather than dropping the keystrokes.
    if (sweepable_ && state == QValidator::Invalid && !body.isEmpty() && text.startsWith(this->prefix()) &&
        text.endsWith(this->suffix()))
        return as_sweep();
    if (state == QValidator::Acceptable && this->hasFocus())
        setProblem({});
    return state;
}

template <class Base, class Derived>
QList<double> CheckedBox<Base, Derived>::sweepOf(const QString& body, QString* problem) const
{
    // The engine's grammar and messages (sweep_list.hpp), so the CLI reads the same text.
    const std::string text = body.toStdString(), what = label_of(this, this->prefix()).toStdString();
    QList<double> values;
    try {
        if constexpr (std::is_same_v<Base, QSpinBox>) {
            for (int64_t v : embedlab::sweep_integers(text, this->minimum(), this->maximum(), what))
                values << static_cast<double>(v);
        } else {
            for (double v : embedlab::sweep_numbers(text, this->minimum(), this->maximum(), what))
                values << v;
        }
    } catch (const embedlab::InputError& e) {
        if (problem)
            *problem = QString::fromUtf8(e.what());
        return {};
    }
    return values;
}

template <class Base, class Derived> bool CheckedBox<Base, Derived>::isSweep() const
{
    return sweepable_ &&
           embedlab::is_sweep_text(
               typed_number(this->lineEdit()->text(), this->prefix(), this->suffix()).toStdString());
}

template <class Base, class Derived> QList<double> CheckedBox<Base, Derived>::sweep() const
{
    return isSweep()
               ? sweepOf(typed_number(this->lineEdit()->text(), this->prefix(), this->suffix()), nullptr)
               : QList<double>{};
}

template <class Base, class Derived> void CheckedBox<Base, Derived>::keyPressEvent(QKeyEvent* event)
{
    // Qt would put back the last valid value: the typed text and its problem stay,
    // and so does a sweep.
    if ((event->key() == Qt::Key_Return || event->key() == Qt::Key_Enter) &&
        (!problem_.isEmpty() || isSweep())) {
        event->accept();
        return;
    }
    Base::keyPressEvent(event);
}

template <class Base, class Derived> void CheckedBox<Base, Derived>::focusOutEvent(QFocusEvent* event)
{
    const QString typed = this->lineEdit()->text();
    const bool keep = !problem_.isEmpty() || isSweep();
    Base::focusOutEvent(event); // writes the last valid value back into the text
    if (keep && this->lineEdit()->text() != typed)
        this->lineEdit()->setText(typed); // validate() sets the problem again
}

template <class Base, class Derived> void CheckedBox<Base, Derived>::setProblem(const QString& problem) const
{
    if (problem == problem_)
        return;
    auto* self = const_cast<CheckedBox*>(this);
    problem_ = problem;
    show_state(self, problem, {});
    emit static_cast<Derived*>(self)->problemChanged(problem);
}

template class CheckedBox<QSpinBox, CheckedSpinBox>;
template class CheckedBox<QDoubleSpinBox, CheckedDoubleSpinBox>;

bool shown_in(const QWidget* w, const QWidget* ancestor)
{
    for (; w && w != ancestor; w = w->parentWidget())
        if (w->isHidden() && w->testAttribute(Qt::WA_WState_ExplicitShowHide))
            return false;
    return true;
}

QString first_problem(const QList<QWidget*>& boxes, const QWidget* within)
{
    for (QWidget* w : boxes) {
        if (!w || !(within ? shown_in(w, within) : w->isVisibleTo(w->window())))
            continue;
        if (auto* s = qobject_cast<CheckedSpinBox*>(w); s && !s->problem().isEmpty())
            return s->problem();
        if (auto* d = qobject_cast<CheckedDoubleSpinBox*>(w); d && !d->problem().isEmpty())
            return d->problem();
    }
    return {};
}

ProblemLabel::ProblemLabel(const QList<QWidget*>& boxes, const QString& prefix, QWidget* parent)
    : QLabel(parent), boxes_(boxes), prefix_(prefix)
{
    setObjectName("problem");
    setStyleSheet("color: #b00000;");
    setWordWrap(true);
    hide();
    for (QWidget* box : boxes) {
        if (auto* s = qobject_cast<CheckedSpinBox*>(box))
            connect(s, &CheckedSpinBox::problemChanged, this, &ProblemLabel::refresh);
        if (auto* d = qobject_cast<CheckedDoubleSpinBox*>(box))
            connect(d, &CheckedDoubleSpinBox::problemChanged, this, &ProblemLabel::refresh);
    }
}

void ProblemLabel::refresh()
{
    const QString p = first_problem(boxes_);
    setText(p.isEmpty() ? QString() : prefix_ + p + ".");
    setVisible(!p.isEmpty());
}

} // namespace embedlab::app
