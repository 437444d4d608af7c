// Spin boxes that say no: the one validator of every number box in the window.
// QSpinBox drops a keystroke that would leave its range, and Return or leaving the
// box puts back the last valid value, so "500" typed where d = 128 silently
// becomes 50 and runs. These keep the typed text instead (also after Return and
// Tab): the box is framed in red, its tooltip and problem() name the typed value
// and the range, a ProblemLabel beside the boxes says it, and whoever runs the
// choice refuses while a visible box has a problem (MethodPanel::run, the Fourier
// and LLE updates).
#pragma once

#include <QDoubleSpinBox>
#include <QLabel>
#include <QSpinBox>

namespace embedlab::app {

// What both boxes do, over QSpinBox or QDoubleSpinBox (instantiated for those two
// in the .cpp). The Qt classes below (Derived) only add the problemChanged signal,
// which a template cannot declare; CheckedBox emits it.
template <class Base, class Derived> class CheckedBox : public Base {
public:
    explicit CheckedBox(QWidget* parent = nullptr);
    QString problem() const { return problem_; } // "" while the typed value is in range
    QValidator::State validate(QString& text, int& pos) const override;

protected:
    void keyPressEvent(QKeyEvent* event) override;   // Return keeps an out-of-range text
    void focusOutEvent(QFocusEvent* event) override; // so does leaving the box

private:
    void setProblem(const QString& problem) const;
    mutable QString problem_;
};

class CheckedSpinBox : public CheckedBox<QSpinBox, CheckedSpinBox> {
    Q_OBJECT
    using CheckedBox::CheckedBox; // public, as inherited constructors keep CheckedBox's access
signals:
    void problemChanged(const QString& problem);
};

class CheckedDoubleSpinBox : public CheckedBox<QDoubleSpinBox, CheckedDoubleSpinBox> {
    Q_OBJECT
    using CheckedBox::CheckedBox; // public, as inherited constructors keep CheckedBox's access
signals:
    void problemChanged(const QString& problem);
};

extern template class CheckedBox<QSpinBox, CheckedSpinBox>;
extern template class CheckedBox<QDoubleSpinBox, CheckedDoubleSpinBox>;

// The first problem among `boxes` that are visible ("" if none).
QString first_problem(const QList<QWidget*>& boxes);

// A red line beside `boxes` saying their first problem with `prefix` before it
// ("Not run while "), hidden while there is none.
class ProblemLabel : public QLabel {
    Q_OBJECT
public:
    ProblemLabel(const QList<QWidget*>& boxes, const QString& prefix, QWidget* parent);
    void refresh(); // after the boxes' visibility changed

private:
    QList<QWidget*> boxes_;
    QString prefix_;
};

} // namespace embedlab::app
