#include "checked_spin_box.hpp"

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

CheckedSpinBox::CheckedSpinBox(QWidget* parent) : QSpinBox(parent)
{
    connect(this, &QSpinBox::valueChanged, this, [this] {
        if (!hasFocus())
            setProblem({});
    });
}

QValidator::State CheckedSpinBox::validate(QString& text, int& pos) const
{
    const QString body = typed_number(text, prefix(), suffix());
    bool ok = false;
    const qlonglong v = body.toLongLong(&ok);
    if (ok && (v < minimum() || v > maximum())) {
        setProblem(out_of_range(prefix(), body, QString::number(minimum()), QString::number(maximum())));
        return QValidator::Intermediate; // the typed text stays
    }
    const auto state = QSpinBox::validate(text, pos);
    if (state == QValidator::Acceptable && hasFocus())
        setProblem({});
    return state;
}

void CheckedSpinBox::setProblem(const QString& problem) const
{
    if (problem == problem_)
        return;
    auto* self = const_cast<CheckedSpinBox*>(this);
    if (problem_.isEmpty())
        self->setProperty("plain_tooltip", toolTip());
    problem_ = problem;
    show_problem(self, problem);
    emit self->problemChanged(problem);
}

CheckedDoubleSpinBox::CheckedDoubleSpinBox(QWidget* parent) : QDoubleSpinBox(parent)
{
    connect(this, &QDoubleSpinBox::valueChanged, this, [this] {
        if (!hasFocus())
            setProblem({});
    });
}

QValidator::State CheckedDoubleSpinBox::validate(QString& text, int& pos) const
{
    const QString body = typed_number(text, prefix(), suffix());
    bool ok = false;
    const double v = locale().toDouble(body, &ok);
    if (ok && (v < minimum() || v > maximum())) {
        setProblem(out_of_range(prefix(), body, textFromValue(minimum()), textFromValue(maximum())));
        return QValidator::Intermediate;
    }
    const auto state = QDoubleSpinBox::validate(text, pos);
    if (state == QValidator::Acceptable && hasFocus())
        setProblem({});
    return state;
}

void CheckedDoubleSpinBox::setProblem(const QString& problem) const
{
    if (problem == problem_)
        return;
    auto* self = const_cast<CheckedDoubleSpinBox*>(this);
    if (problem_.isEmpty())
        self->setProperty("plain_tooltip", toolTip());
    problem_ = problem;
    show_problem(self, problem);
    emit self->problemChanged(problem);
}

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

} // namespace embedlab::app
