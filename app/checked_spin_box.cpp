#include "checked_spin_box.hpp"

#include <QFocusEvent>
#include <QKeyEvent>
#include <QLineEdit>
#include <type_traits>

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

// Red frame and the problem as tooltip, or back to normal.
void show_problem(QAbstractSpinBox* box, const QString& problem)
{
    box->setStyleSheet(problem.isEmpty() ? QString()
                                         : QString("QAbstractSpinBox { border: 2px solid #b00000; }"));
    box->setToolTip(problem.isEmpty() ? box->property("plain_tooltip").toString() : problem);
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
    if (state == QValidator::Acceptable && this->hasFocus())
        setProblem({});
    return state;
}

template <class Base, class Derived> void CheckedBox<Base, Derived>::keyPressEvent(QKeyEvent* event)
{
    // Qt would put back the last valid value: the typed text and its problem stay.
    if ((event->key() == Qt::Key_Return || event->key() == Qt::Key_Enter) && !problem_.isEmpty()) {
        event->accept();
        return;
    }
    Base::keyPressEvent(event);
}

template <class Base, class Derived> void CheckedBox<Base, Derived>::focusOutEvent(QFocusEvent* event)
{
    const QString typed = this->lineEdit()->text();
    const bool keep = !problem_.isEmpty();
    Base::focusOutEvent(event); // writes the last valid value back into the text
    if (keep && this->lineEdit()->text() != typed)
        this->lineEdit()->setText(typed); // validate() sets the problem again
}

template <class Base, class Derived> void CheckedBox<Base, Derived>::setProblem(const QString& problem) const
{
    if (problem == problem_)
        return;
    auto* self = const_cast<CheckedBox*>(this);
    if (problem_.isEmpty())
        self->setProperty("plain_tooltip", this->toolTip());
    problem_ = problem;
    show_problem(self, problem);
    emit static_cast<Derived*>(self)->problemChanged(problem);
}

template class CheckedBox<QSpinBox, CheckedSpinBox>;
template class CheckedBox<QDoubleSpinBox, CheckedDoubleSpinBox>;

QString first_problem(const QList<QWidget*>& boxes)
{
    for (QWidget* w : boxes) {
        if (!w || !w->isVisibleTo(w->window()))
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
