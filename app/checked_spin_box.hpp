// Spin boxes that say no: the one validator of every number box in the window.
// QSpinBox drops a keystroke that would leave its range, and Return or leaving the
// box puts back the last valid value, so "500" typed where d = 128 silently
// becomes 50 and runs. These keep the typed text instead (also after Return and
// Tab): the box is framed in red, its tooltip and problem() name the typed value
// and the range, a ProblemLabel beside the boxes says it, and whoever runs the
// choice refuses while a visible box has a problem (MethodPanel::run, the Fourier
// and LLE updates).
//
// A sweepable box (the method panel's request fields) also takes a sweep as typed
// text: a list "8,16,32" or a range "8:128:8" (embedlab/sweep_list.hpp, as
// `embedlab-cli sweep` reads it). Every value is checked against the box's range;
// the text stays (framed in blue while valid, red with the problem if not), and
// sweep() gives its values. value() keeps the last single number. Text that is
// neither ("a:b", "abc") is kept too, with the grammar's problem.
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
    // Whether the box takes a sweep (off by default: a view's box stays one number).
    void setSweepable(bool on) { sweepable_ = on; }
    bool sweepable() const { return sweepable_; }
    bool isSweep() const; // the text is a sweep (valid or not)
    // The sweep's values as typed, in order; empty when the text is one number or
    // the sweep has a problem.
    QList<double> sweep() const;

protected:
    void keyPressEvent(QKeyEvent* event) override;   // Return keeps an out-of-range text
    void focusOutEvent(QFocusEvent* event) override; // so does leaving the box

private:
    void setProblem(const QString& problem) const;
    QList<double> sweepOf(const QString& body, QString* problem) const; // body: without prefix, suffix
    mutable QString problem_;
    mutable bool in_sweep_ = false; // the last text validated was a sweep
    bool sweepable_ = false;
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

// The first problem among `boxes` that are visible ("" if none); with `within`, those
// shown_in() it, whether or not it is shown now.
QString first_problem(const QList<QWidget*>& boxes, const QWidget* within = nullptr);
// Whether `w` shows when `ancestor` does: nothing between them was hidden on purpose
// (another page, a row for another method). Unlike isVisibleTo(), true before the
// window was ever shown, and whichever tab holds `ancestor`.
bool shown_in(const QWidget* w, const QWidget* ancestor);

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
